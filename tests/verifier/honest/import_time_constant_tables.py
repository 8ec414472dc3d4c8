"""Honest: constant tables made at import and read by the kernel, one a torch tensor, the other a TVM tensor over
torch memory (``tvm.runtime.from_dlpack``, the torch tensor held only through DLPack). No operator of a call wrote
their bytes: the census at the end of the import records them, so a correctness draw reads them as they were made
(README, "Memory no recorded writer left")."""

# problem: p36
import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128
_INV_COLS = torch.full((1,), 1.0 / HIDDEN, dtype=torch.float32)  # the mean's divisor
_EPS = tvm.runtime.from_dlpack(torch.full((1,), 1e-6, dtype=torch.float32))


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, inv_ptr: T.handle, eps_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    inv = T.match_buffer(inv_ptr, (1,), "float32")
    eps = T.match_buffer(eps_ptr, (1,), "float32")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        for j in range(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        scale = T.rsqrt(acc[0] * inv[0] + eps[0])
        for j in range(HIDDEN):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_kernel = tvm.compile(rmsnorm, target="llvm")


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, _INV_COLS, _EPS, out)
    return out
