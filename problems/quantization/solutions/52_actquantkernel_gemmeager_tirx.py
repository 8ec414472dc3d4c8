"""p52 attention_output_projection_qwen3vl_fp8 — plan `actquantkernel_gemmeager`, TIRx (partial).

Plan (partial): the TIRx kernel does the op's dynamic activation quantisation in one pass over the
bf16 activation: every (token, 128-channel group) is owned by a half-warp (16 threads × 8 bf16, one
16-byte load each), amax is reduced over the 16 lanes with butterfly shuffles in float32,
s = max(amax, 1e-10) / 448, q = fp8_e4m3(clamp(x / s, ±448)) (round to nearest even), and the lane
writes float(q) · s — the exact dequantised activation, float32 (two 16-byte stores), which is what
the block-FP8 GEMM consumes. The GEMM stays eager in float32 (weight tiles dequantised, then
`a @ W.T`), exact because fp8 products fit float32; a real FP8 tensor-core GEMM with per-group
rescaling is the missing piece of this plan. One CTA of 256 threads covers 16 groups. Compiled once
per (tokens, in_features).
"""

import torch
import tvm
from tvm.script import tirx as T

GROUP = 128
VEC = 8  # bf16 per 16-byte load
LANES = GROUP // VEC  # threads per (token, group)
THREADS = 256
GROUPS_PER_CTA = THREADS // LANES
FP8_MAX = 448.0
GROUP_EPS = 1e-10

_KERNELS: dict[tuple[int, int], tvm.runtime.Module] = {}


def _build(tokens: int, k: int) -> tvm.runtime.Module:
    groups = tokens * (k // GROUP)
    grid = (groups + GROUPS_PER_CTA - 1) // GROUPS_PER_CTA

    @T.prim_func
    def quant(x_ptr: T.handle, a_ptr: T.handle):
        X = T.match_buffer(x_ptr, (groups, GROUP), "bfloat16")
        A = T.match_buffer(a_ptr, (groups, GROUP), "float32")
        T.device_entry()
        bx = T.cta_id([grid])
        tx = T.thread_id([THREADS])
        grp = T.meta_var(bx * GROUPS_PER_CTA + tx // LANES)
        col = T.meta_var((tx % LANES) * VEC)
        xv = T.alloc_local((VEC,), "bfloat16")
        av = T.alloc_local((VEC,), "float32")
        if grp < groups:
            for i in T.vectorized(VEC):
                xv[i] = X[grp, col + i]
        else:
            for i in T.vectorized(VEC):
                xv[i] = T.bfloat16(0)
        amax: T.f32 = T.float32(0)
        for i in T.unroll(VEC):
            amax = T.max(amax, T.abs(T.Cast("float32", xv[i])))
        # every lane shuffles (out-of-range groups carry zeros), so full-mask shuffles are safe
        amax = T.cuda.warp_max(amax, width=LANES)
        scale: T.f32 = T.max(amax, T.float32(GROUP_EPS)) / T.float32(FP8_MAX)
        for i in T.unroll(VEC):
            y: T.f32 = T.min(T.max(T.Cast("float32", xv[i]) / scale, T.float32(-FP8_MAX)), T.float32(FP8_MAX))
            av[i] = T.Cast("float32", T.Cast("float8_e4m3fn", y)) * scale
        if grp < groups:
            for i in T.vectorized(VEC):
                A[grp, col + i] = av[i]

    mod = tvm.IRModule({"main": quant})
    return tvm.compile(mod, target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")


def _shape_key(attn_output: torch.Tensor, *_: object) -> tuple[int, int]:
    return attn_output.shape[0], attn_output.shape[1] * attn_output.shape[2]


def run(attn_output: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor) -> torch.Tensor:
    key = _shape_key(attn_output)
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = _KERNELS[key] = _build(*key)
    tokens, k = key
    act = torch.empty((tokens, k), dtype=torch.float32, device=attn_output.device)
    kernel(attn_output.contiguous().view(tokens * (k // GROUP), GROUP), act.view(tokens * (k // GROUP), GROUP))
    # eager: 128x128 tile-scaled weight, then the float32 GEMM (fp8 products are exact in float32)
    n = weight.shape[0]
    tile = weight_scale.repeat_interleave(GROUP, dim=0)[:n].repeat_interleave(GROUP, dim=1)[:, :k]
    return (act @ (weight.float() * tile).t()).to(attn_output.dtype)
