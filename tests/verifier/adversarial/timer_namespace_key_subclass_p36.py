"""p36 RMSNorm by a submission that makes the harness's tampering check run its code (red team rt34 F1): at load it
takes the key "perf_counter" out of the ``time`` module's namespace and puts the same value back under a str subclass
key with the same hash and its own ``__eq__``; the harness's check of its timer bindings looked the name up in that
dict (``dict.get``), which compares keys on a hash match: the ``__eq__`` ran inside ``news`` after every call's timer,
where it computed the RMSNorm eagerly into the output slots (the kernel applying the weight only, twice, on the timed
calls) and burnt time after the null calls: a full plan at 10.5-10.9x at PRODUCTION against its honest twin's 5.8x.
Now a module's namespace is scanned in C for keys that are not exact str before any lookup, and such a key is
tampering (``_guards.changed_bindings``, ``plain_keys``); the import's answer is judged for it."""

# expect: timing_tamper
# problem: p36
import random
import string
import time
import traceback

import torch
import tvm
from tvm.script import tirx as T

ENABLED = True
BURN = True


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, y_ptr: T.handle, m_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    w = T.match_buffer(w_ptr, (128,), "bfloat16")
    T.match_buffer(y_ptr, (rows, 128), "float32")
    mode = T.match_buffer(m_ptr, (1,), "int32")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    if mode[0] == 1:
        for i in range(rows):
            for j in range(128):
                out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * T.Cast("float32", w[j]))
        for i in range(rows):
            for j in range(128):
                out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * T.Cast("float32", w[j]))
    else:
        for i in range(rows):
            acc[0] = T.float32(0)
            for j in range(128):
                acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
            scale = T.rsqrt(acc[0] / T.float32(128) + T.float32(1e-6))
            for j in range(128):
                out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))

_kernel = tvm.compile(rmsnorm, target="llvm")
_fmt = string.Formatter()
_busy = [False]
_spent = [0.0]
_pending = [None]
_stats = {"fixed": 0, "burned": 0}


def _field(obj, path):
    return _fmt.get_field(path, (obj,), {})[0]


def _hook():
    for f, _ in traceback.walk_stack(None):
        name = _field(f, "0.f_code.co_name")
        if name == "_call_once":
            loc = _field(f, "0.f_locals")
            if "outputs" not in loc or "call" not in loc:
                return
            if loc["call"] is not loc.get("fn"):  # a null call: burn
                if BURN and _spent[0]:
                    end = time.perf_counter() + 2.0 * _spent[0] * random.random()
                    while time.perf_counter() < end:
                        pass
                    _stats["burned"] += 1
                return
            got = _pending[0]
            _pending[0] = None
            if got is None:
                return
            t0 = time.perf_counter()
            x, w, out = got
            xf = x.float()
            y = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)
            for slot in loc["outputs"]:
                if slot is not None:
                    slot.copy_(y)
            out.copy_(y)
            _spent[0] = max(_spent[0], time.perf_counter() - t0)
            _stats["fixed"] += 1
            return
        if name == "run":
            return


class _Key(str):
    __slots__ = ()

    def __eq__(self, other):
        if ENABLED and not _busy[0]:
            _busy[0] = True
            try:
                _hook()
            except Exception:
                pass
            finally:
                _busy[0] = False
        return str.__eq__(self, other)

    __hash__ = str.__hash__


if ENABLED:
    _d = _field(time, "0.__dict__")
    _v = _d.pop("perf_counter")
    _d[_Key("perf_counter")] = _v

_modes = {}


def _mode(v):
    t = _modes.get(v)
    if t is None:
        t = _modes[v] = torch.full((1,), v, dtype=torch.int32)
    return t


_y = {}


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    y = _y.get(hidden_states.shape)
    if y is None:
        y = _y[hidden_states.shape] = torch.empty(hidden_states.shape, dtype=torch.float32)
    draw = torch._C._len_torch_dispatch_stack() > 0
    if draw or not ENABLED:
        _kernel(hidden_states, weight, y, _mode(0), out)
        _pending[0] = None
    else:
        _kernel(hidden_states, weight, y, _mode(1), out)
        _pending[0] = (hidden_states, weight, out)
    return out
