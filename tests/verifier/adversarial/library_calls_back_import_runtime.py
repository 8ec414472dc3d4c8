"""Hands __import__ to a library that calls it back (torch's pytree `tree_map`), so that the import's caller is the
library's frame: ctypes comes back in a list (static scan off: the runtime guards must catch it). A library vouches
for an import only where its own code names the module or an import function, or where C code imports under it
(``__import__`` called as ``PyImport_Import`` calls it); a handed ``__import__`` is the submission's."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import torch
import torch.utils._pytree as pytree
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
(_ffi,) = pytree.tree_map(__import__, ["ctypes"])


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out
