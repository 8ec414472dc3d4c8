"""p36 RMSNorm by a submission that plants a key in what the harness reads after each call's timer (red team rt35
F1): ``_call_once`` held the threads found before the call as a dict; run() reached it through the frame's
``f_locals`` and swapped the main thread's int key for an object with the same hash and its own ``__eq__``, which
the lookup in ``background`` ran after STOP: it wrote the last eighth of the rows eagerly (the kernel the rest),
passing as a full plan with that work unpriced. Now the facts ``_call_once`` holds while run() runs are tuples
(``_worker.threads_before``, ``clocks_before``, ``moved_since``): nothing there to plant in, the hook never runs, and
the rows it should have written hold the erase sentinel."""

# expect: nan
# or: wrong_output, the unwritten rows hold the erase sentinel (NaN hardened, a bf16 value by the paper protocol)
# problem: p36
import string
import threading
import traceback

import torch
import tvm
from tvm.script import tirx as T

ENABLED = True
SPLIT = 0.87

@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, m_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    w = T.match_buffer(w_ptr, (128,), "bfloat16")
    lim = T.match_buffer(m_ptr, (1,), "int32")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        if i < lim[0]:
            acc[0] = T.float32(0)
            for j in range(128):
                acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
            scale = T.rsqrt(acc[0] / T.float32(128) + T.float32(1e-6))
            for j in range(128):
                out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))

_kernel = tvm.compile(rmsnorm, target="llvm")

_fmt = string.Formatter()
_lims = {}


def _lim(v):
    t = _lims.get(v)
    if t is None:
        t = _lims[v] = torch.full((1,), v, dtype=torch.int32)
    return t
_stats = {"fixed": 0, "planted": 0}


def _field(obj, path):
    return _fmt.get_field(path, (obj,), {})[0]


def _call_once_locals():
    for f, _ in traceback.walk_stack(None):
        if _field(f, "0.f_code.co_name") == "_call_once":
            return _field(f, "0.f_locals")
    return None


def _eager(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)


class _K:
    __slots__ = ("ident", "job")

    def __init__(self, ident, job):
        self.ident = ident
        self.job = job

    def __hash__(self):
        return hash(self.ident)

    def __eq__(self, other):
        job = self.job
        if job is not None:
            self.job = None
            x, w, out, k = job
            out[k:].copy_(_eager(x[k:], w))
            _stats["fixed"] += 1
        return other == self.ident


def run(x, w):
    rows = x.shape[0]
    out = torch.empty_like(x)
    draw = torch._C._len_torch_dispatch_stack() > 0
    if draw or not ENABLED:
        _kernel(x, w, _lim(rows), out)
        return out
    k = min(rows, int(rows * SPLIT) + 1)
    _kernel(x, w, _lim(k), out)
    loc = _call_once_locals()
    if loc is not None and "before" in loc:
        d = loc["before"][0]
        me = threading.get_ident()
        if me in d:
            v = d.pop(me)
            d[_K(me, (x, w, out, k))] = v
            _stats["planted"] += 1
    return out
