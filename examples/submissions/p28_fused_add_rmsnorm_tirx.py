"""Fused residual add + RMSNorm at hidden size 4096 (p28) for the cpu backend: eager PyTorch only
allocates the output; one TIRx kernel built for the llvm target adds, reduces and normalises each
row in float32 (the sum is never rounded to bf16)."""

import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-5
HIDDEN = 4096


@T.prim_func
def fused_add_rmsnorm(h_ptr: T.handle, r_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    h = T.match_buffer(h_ptr, (rows, HIDDEN), "bfloat16")
    r = T.match_buffer(r_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    total = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        total[0] = T.float32(0)
        for j in range(HIDDEN):
            v = T.Cast("float32", h[i, j]) + T.Cast("float32", r[i, j])
            total[0] = total[0] + v * v
        scale = T.rsqrt(total[0] / T.float32(HIDDEN) + T.float32(EPS))
        for j in range(HIDDEN):
            v = T.Cast("float32", h[i, j]) + T.Cast("float32", r[i, j])
            out[i, j] = T.Cast("bfloat16", v * scale * T.Cast("float32", w[j]))


_fused_add_rmsnorm = tvm.compile(fused_add_rmsnorm, target="llvm")


def run(hidden_states: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(hidden_states)
    _fused_add_rmsnorm(hidden_states, residual, weight, out)
    return out
