"""Fused residual add + RMSNorm at hidden size 4096 (p28) for the cuda backend: one TIRx kernel,
one warp per row. Lanes stride the row (coalesced), sum squares of the float32 sum, reduce with a
butterfly shuffle, then write the normalised row; the sum is never rounded to bf16."""

import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-5
HIDDEN = 4096
WARP = 32


@T.prim_func
def fused_add_rmsnorm(h_ptr: T.handle, r_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    h = T.match_buffer(h_ptr, (rows, HIDDEN), "bfloat16")
    r = T.match_buffer(r_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    with T.launch_thread("blockIdx.x", rows) as row:
        lane = T.launch_thread("threadIdx.x", WARP)
        total = T.alloc_buffer((1,), "float32", scope="local")
        total[0] = T.float32(0)
        for k in range(HIDDEN // WARP):
            c = k * WARP + lane
            v = T.Cast("float32", h[row, c]) + T.Cast("float32", r[row, c])
            total[0] = total[0] + v * v
        for s in T.unroll(5):
            total[0] = total[0] + T.tvm_warp_shuffle_xor(T.uint32(0xFFFFFFFF), total[0], 16 >> s, WARP, WARP)
        scale = T.rsqrt(total[0] / T.float32(HIDDEN) + T.float32(EPS))
        for k in range(HIDDEN // WARP):
            c = k * WARP + lane
            v = T.Cast("float32", h[row, c]) + T.Cast("float32", r[row, c])
            out[row, c] = T.Cast("bfloat16", v * scale * T.Cast("float32", w[c]))


_kernel = tvm.compile(
    fused_add_rmsnorm, target=tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}), tir_pipeline="tirx"
)


def run(hidden_states: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, residual, weight, out)
    return out
