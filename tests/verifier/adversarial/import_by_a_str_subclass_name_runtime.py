"""`__import__(name)` with a `str` subclass as the name: the guards judged only exact `str` names (a subclass's
methods would run the submission's code inside their vault) and let any other through unjudged, so ctypes imported
(raw memory, native code). An import by any name but a plain `str` is now refused, whoever asks: the import machinery
itself runs the subclass's methods (its hash finds the module in `sys.modules`), so no judged name could be trusted
to be the one imported."""

# expect: forbidden_api
# problem: p36
# static-scan: off
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
    pass


_ffi = __import__(_Name("ctypes"))
_raw = _ffi.c_char.from_address


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out
