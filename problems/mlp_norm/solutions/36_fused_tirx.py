"""p36 rmsnorm_h128 — plan `fused`, TIRx: one kernel, nothing eager but the output allocation.

Plan: each row of 128 bf16 (256 bytes) is owned by a half-warp: 16 threads × 8 bf16, so every thread
issues one 16-byte load of x, one 16-byte load of the (L1/L2-resident) weight slice and one 16-byte
store. The sum of squares is reduced in float32 across the 16 lanes with butterfly shuffles (no shared
memory, no block barrier). A CTA of 256 threads covers 16 rows; the grid covers all rows, with a row
guard for a batch that is not a multiple of 16. Math in float32 as the reference:
y = bf16(x * rsqrt(sum(x²)/128 + 1e-6) * w). Compiled once per batch size and cached.
"""

import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128
VEC = 8  # bf16 per 16-byte access
LANES = HIDDEN // VEC  # threads per row
THREADS = 256
ROWS_PER_CTA = THREADS // LANES
EPS = 1e-6

_KERNELS: dict[tuple[int], tvm.runtime.Module] = {}


def _build(rows: int) -> tvm.runtime.Module:
    grid = (rows + ROWS_PER_CTA - 1) // ROWS_PER_CTA

    @T.prim_func
    def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, y_ptr: T.handle):
        X = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
        W = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
        Y = T.match_buffer(y_ptr, (rows, HIDDEN), "bfloat16")
        T.device_entry()
        bx = T.cta_id([grid])
        tx = T.thread_id([THREADS])
        # meta_var keeps the index an expression, so the vectorizer sees a contiguous 16-byte access
        row = T.meta_var(bx * ROWS_PER_CTA + tx // LANES)
        col = T.meta_var((tx % LANES) * VEC)
        xv = T.alloc_local((VEC,), "bfloat16")
        wv = T.alloc_local((VEC,), "bfloat16")
        yv = T.alloc_local((VEC,), "bfloat16")
        if row < rows:
            for i in T.vectorized(VEC):
                xv[i] = X[row, col + i]
            for i in T.vectorized(VEC):
                wv[i] = W[col + i]
        else:
            for i in T.vectorized(VEC):
                xv[i] = T.bfloat16(0)
        acc: T.f32 = T.float32(0)
        for i in T.unroll(VEC):
            acc = acc + T.Cast("float32", xv[i]) * T.Cast("float32", xv[i])
        # all 32 lanes take part in the shuffles (the guard above only zeroes the data)
        acc = T.cuda.warp_sum(acc, width=LANES)
        inv: T.f32 = T.rsqrt(acc * T.float32(1.0 / HIDDEN) + T.float32(EPS))
        for i in T.unroll(VEC):
            yv[i] = T.Cast("bfloat16", T.Cast("float32", xv[i]) * inv * T.Cast("float32", wv[i]))
        if row < rows:
            for i in T.vectorized(VEC):
                Y[row, col + i] = yv[i]

    mod = tvm.IRModule({"main": rmsnorm})
    return tvm.compile(mod, target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")


def _shape_key(hidden_states: torch.Tensor, weight: torch.Tensor) -> tuple[int]:
    return (hidden_states.shape[0],)


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    key = _shape_key(hidden_states, weight)
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = _KERNELS[key] = _build(*key)
    x = hidden_states.contiguous()
    out = torch.empty_like(x)
    kernel(x, weight.contiguous(), out)
    return out
