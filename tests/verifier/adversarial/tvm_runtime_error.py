"""A TIRx kernel called with a buffer of the wrong shape: TVM raises from C++. Its FFI layer rebuilds
the C++ backtrace as Python frames named after C sources (e.g. Objects/descrobject.c) and calls
sys._getframe from them; the verdict must be the kernel's own error, not a forbidden introspection."""

# expect: exception
# problem: p36
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def copy_rows(x_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    for i, j in T.grid(rows, 128):
        out[i, j] = x[i, j]


_copy_rows = tvm.compile(copy_rows, target="llvm")


def run(hidden_states, weight):
    out = torch.empty((hidden_states.shape[0], 64), dtype=hidden_states.dtype)  # wrong width
    _copy_rows(hidden_states, out)
    return out
