"""p36 RMSNorm in one TIRx kernel, by a submission that rebinds, at import, every function in the globals of the
harness's modules it can reach: the frames below its import (``f_globals``) and, from the functions found there,
their modules' globals (``__globals__``), read through ``string.Formatter`` so that no attribute is named in the
source. A wrapper notes that it ran and calls the original.

Red team rt32 F1: the harness's per-call steps (the threads before and after a call, the tampering found, the
answer's facts) were the Worker's methods over module globals; a wrapper there ran eager work before each call's
timer and widened the null calls' spread (a full plan at 2.4x its own honest kernel's speed). Now every step the
worker runs once the file is loaded was bound before it (``_vault.Registry.protect``/``bind``, the walk over them
in ``_worker.open_vaults``): no wrapper runs after the import, and the kernel's own output passes. Were one to run,
run() returns zeros (wrong_output). (It replaces ``adversarial/launch_before_the_timer_runtime.py``, whose wrapper of
``native_ids`` launched the kernel before the timer: red team rt31b F1.)"""

# problem: p36

import string
import traceback
import types

import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    w = T.match_buffer(w_ptr, (128,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        for j in range(128):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        scale = T.rsqrt(acc[0] / T.float32(128) + T.float32(1e-6))
        for j in range(128):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_kernel = tvm.compile(rmsnorm, target="llvm")
_format = string.Formatter()
_ran: list[str] = []
_loaded = [False]


def _field(obj, path):
    return _format.get_field(path, (obj,), {})[0]


def _wrapped(name, original):
    def wrapper(*args, **kwargs):
        if _loaded[0]:
            _ran.append(name)
        return original(*args, **kwargs)

    return wrapper


def _rebind(namespace, seen):
    if id(namespace) in seen or "mkbsim" not in str(namespace.get("__name__", "")):
        return
    seen.add(id(namespace))
    for name, value in list(namespace.items()):
        if type(value) is types.FunctionType and not name.startswith("__"):
            namespace[name] = _wrapped(f"{namespace['__name__']}.{name}", value)
            _rebind(_field(value, "0.__globals__"), seen)


def _rebind_all():
    seen = set()
    for frame, _ in traceback.walk_stack(None):
        _rebind(_field(frame, "0.f_globals"), seen)
    return len(seen)


REACHED = _rebind_all()
_loaded[0] = True


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    if _ran:
        return out.zero_()
    _kernel(hidden_states, weight, out)
    return out
