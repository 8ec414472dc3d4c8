"""The timer route (F6's): reaches the harness's frames from run() (``traceback.walk_stack`` and
``string.Formatter().get_field`` on ``f_locals``/``f_globals``, no such name written) and rebinds every ``timed_call``
it finds there (an object's attribute, a module global) to a wrapper that calls the original and hands back another
tensor than the one run() returned: the kernel's correct output, while run() returns a wrong one. A harness that looks
its timer up on anything the submission reaches would time, audit and judge what the wrapper chose; the harness's
steps are bound before the submission loads, so the wrapper never runs and the wrong answer is judged as one."""

# expect: wrong_output
# problem: p36
# static-scan: off
import string
import traceback

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


_field = string.Formatter().get_field
_good: list = []


def _wrap(original):
    def timed_call(fn, args, *rest, **kwargs):
        result = original(fn, args, *rest, **kwargs)
        return _good[-1] if _good else result

    return timed_call


def _rebind() -> None:
    for frame, _ in traceback.walk_stack(None):
        for scope in ("f_locals", "f_globals"):
            names = _field(f"0.{scope}", (frame,), {})[0]
            for name, value in list(names.items()):
                if name == "timed_call" and callable(value) and scope == "f_globals":
                    names[name] = _wrap(value)
                inner = getattr(value, "timed_call", None) if hasattr(value, "__dict__") else None
                if callable(inner) and inner.__name__ == "timed_call" and not hasattr(inner, "_mine"):
                    mine = _wrap(inner)
                    mine._mine = True
                    value.timed_call = mine


_rebind()  # at import (the harness's frames are below the import) and again in run()


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    _good.append(out)
    _rebind()
    return out * 2
