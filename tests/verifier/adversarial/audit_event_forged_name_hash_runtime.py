"""`sys.audit("object.__getattr__", obj, name)` with a `str` subclass as the name: the audit hook looked the name up
among the frame attributes it watches (`args[1] not in _frame_names`), which hashed it with the subclass's
`__hash__`: the submission's code ran inside the hook, whose frame (`_send`, `_busy`, `_lock`) its
`sys._getframe(1)` then returned, not being a vault's; adding its thread to `_busy` switched the hook off for it,
and ctypes imported. The hook now looks up a name only of type `str` exactly; any other goes to the vault, which
reads no name but a `str`."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import sys
import threading

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


class _Name(str):
    def __hash__(self):
        frame = sys._getframe(1)
        while frame is not None:
            busy = frame.f_locals.get("_busy")
            if isinstance(busy, set):
                busy.add(threading.get_ident())
            frame = frame.f_back
        return str.__hash__(self)

    def __eq__(self, other):
        return str.__eq__(self, other)


sys.audit("object.__getattr__", object(), _Name("f_code"))
import ctypes  # noqa: E402  refused, unless the hook was switched off above

_raw = ctypes.c_char.from_address


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out
