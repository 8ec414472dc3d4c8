"""A TIRx kernel that does not type-check: it stores into a buffer that is never declared."""

# expect: compile_error
# problem: p36
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def broken(x_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    for i, j in T.grid(rows, 128):
        missing[i, j] = x[i, j]  # noqa: F821


_kernel = tvm.compile(broken, target="llvm")


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, out)
    return out
