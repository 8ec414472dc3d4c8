"""p28 fused_add_rmsnorm_h4096 — plan `fused`, TIRx: add + RMSNorm in one kernel, one pass over HBM.

Plan: one CTA of 512 threads per row of 4096; each thread owns 8 contiguous columns and issues one
16-byte load each of hidden_states, residual and weight, and one 16-byte store of the output. The sum
x = h + r stays in float32 registers (never rounded to bf16, as the problem requires); the sum of
squares is reduced with warp shuffles and then across the 16 warps through a 16-float shared scratch
(T.cuda.cta_sum: one barrier pair). Traffic is the compulsory 3 × rows × 4096 × 2 bytes (+ weight from
L2). Compiled once per batch size and cached.
"""

import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 4096
VEC = 8  # bf16 per 16-byte access
THREADS = HIDDEN // VEC  # 512: one CTA per row
WARPS = THREADS // 32
EPS = 1e-5

_KERNELS: dict[tuple[int], tvm.runtime.Module] = {}


def _build(rows: int) -> tvm.runtime.Module:
    @T.prim_func
    def add_rmsnorm(h_ptr: T.handle, r_ptr: T.handle, w_ptr: T.handle, y_ptr: T.handle):
        H = T.match_buffer(h_ptr, (rows, HIDDEN), "bfloat16")
        R = T.match_buffer(r_ptr, (rows, HIDDEN), "bfloat16")
        W = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
        Y = T.match_buffer(y_ptr, (rows, HIDDEN), "bfloat16")
        T.device_entry()
        row = T.cta_id([rows])
        tx = T.thread_id([THREADS])
        col = T.meta_var(tx * VEC)
        scratch = T.alloc_shared((WARPS,), "float32")
        hv = T.alloc_local((VEC,), "bfloat16")
        rv = T.alloc_local((VEC,), "bfloat16")
        wv = T.alloc_local((VEC,), "bfloat16")
        xv = T.alloc_local((VEC,), "float32")
        yv = T.alloc_local((VEC,), "bfloat16")
        for i in T.vectorized(VEC):
            hv[i] = H[row, col + i]
        for i in T.vectorized(VEC):
            rv[i] = R[row, col + i]
        for i in T.vectorized(VEC):
            wv[i] = W[col + i]
        acc: T.f32 = T.float32(0)
        for i in T.unroll(VEC):
            xv[i] = T.Cast("float32", hv[i]) + T.Cast("float32", rv[i])
            acc = acc + xv[i] * xv[i]
        acc = T.cuda.cta_sum(acc, WARPS, scratch.data)
        inv: T.f32 = T.rsqrt(acc * T.float32(1.0 / HIDDEN) + T.float32(EPS))
        for i in T.unroll(VEC):
            yv[i] = T.Cast("bfloat16", xv[i] * inv * T.Cast("float32", wv[i]))
        for i in T.vectorized(VEC):
            Y[row, col + i] = yv[i]

    mod = tvm.IRModule({"main": add_rmsnorm})
    return tvm.compile(mod, target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")


def _shape_key(hidden_states: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> tuple[int]:
    return (hidden_states.shape[0],)


def run(hidden_states: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    key = _shape_key(hidden_states, residual, weight)
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = _KERNELS[key] = _build(*key)
    h = hidden_states.contiguous()
    out = torch.empty_like(h)
    kernel(h, residual.contiguous(), weight.contiguous(), out)
    return out
