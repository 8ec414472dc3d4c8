"""p28 fused_add_rmsnorm_h4096 — plan `addeager_normkernel`, TIRx: eager add, DSL RMSNorm.

Plan (a partial, unfused point of the design space): the residual add runs in eager PyTorch as
`hidden_states.float().add_(residual)` — float32 so the sum is not rounded to bf16 — which writes a
float32 [rows, 4096] intermediate to HBM; a TIRx kernel then normalises it: one CTA of 512 threads per
row, each thread two 16-byte float32 loads and one 16-byte bf16 store, float32 sum of squares reduced
by warp shuffles and a 16-float shared scratch. Costs about 3x the fused plan's traffic.
"""

import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 4096
VEC = 8  # columns per thread
HALF = VEC // 2  # float32 per 16-byte access
THREADS = HIDDEN // VEC
WARPS = THREADS // 32
EPS = 1e-5

_KERNELS: dict[tuple[int], tvm.runtime.Module] = {}


def _build(rows: int) -> tvm.runtime.Module:
    @T.prim_func
    def rmsnorm_f32(x_ptr: T.handle, w_ptr: T.handle, y_ptr: T.handle):
        X = T.match_buffer(x_ptr, (rows, HIDDEN), "float32")
        W = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
        Y = T.match_buffer(y_ptr, (rows, HIDDEN), "bfloat16")
        T.device_entry()
        row = T.cta_id([rows])
        tx = T.thread_id([THREADS])
        col = T.meta_var(tx * VEC)
        scratch = T.alloc_shared((WARPS,), "float32")
        xv = T.alloc_local((VEC,), "float32")
        wv = T.alloc_local((VEC,), "bfloat16")
        yv = T.alloc_local((VEC,), "bfloat16")
        for j in T.unroll(2):
            for i in T.vectorized(HALF):
                xv[j * HALF + i] = X[row, col + j * HALF + i]
        for i in T.vectorized(VEC):
            wv[i] = W[col + i]
        acc: T.f32 = T.float32(0)
        for i in T.unroll(VEC):
            acc = acc + xv[i] * xv[i]
        acc = T.cuda.cta_sum(acc, WARPS, scratch.data)
        inv: T.f32 = T.rsqrt(acc * T.float32(1.0 / HIDDEN) + T.float32(EPS))
        for i in T.unroll(VEC):
            yv[i] = T.Cast("bfloat16", xv[i] * inv * T.Cast("float32", wv[i]))
        for i in T.vectorized(VEC):
            Y[row, col + i] = yv[i]

    mod = tvm.IRModule({"main": rmsnorm_f32})
    return tvm.compile(mod, target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")


def _shape_key(hidden_states: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> tuple[int]:
    return (hidden_states.shape[0],)


def run(hidden_states: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    key = _shape_key(hidden_states, residual, weight)
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = _KERNELS[key] = _build(*key)
    # eager step: float32 sum (type promotion makes add_ compute bf16 + fp32 in fp32, exactly)
    x = hidden_states.float().add_(residual)
    out = torch.empty_like(hidden_states)
    kernel(x, weight.contiguous(), out)
    return out
