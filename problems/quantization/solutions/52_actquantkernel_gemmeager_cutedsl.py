"""p52 attention_output_projection_qwen3vl_fp8 — plan `actquantkernel_gemmeager`, CuTe DSL (partial).

Plan (partial): the CuTe DSL kernel does the op's dynamic activation quantisation in one pass over the
bf16 activation: every (token, 128-channel group) is owned by a half-warp (16 threads × 8 bf16, one
16-byte load each), amax is reduced over the 16 lanes with butterfly shuffles in float32,
s = max(amax, 1e-10) / 448, q = fp8_e4m3(clamp(x / s, ±448)) (IEEE division, round to nearest even),
and the lane writes float(q) · s — the exact dequantised activation, float32 (32 bytes per lane), which
is what the block-FP8 GEMM consumes. The GEMM stays eager in float32 (weight tiles dequantised, then
`a @ W.T`), exact because fp8 products fit float32; a real FP8 tensor-core GEMM with per-group
rescaling is the missing piece of this plan. One CTA of 256 threads covers 16 groups. Symbolic sizes:
one compilation, cached, called with torch tensors through TVM FFI.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor

GROUP = 128
VEC = 8  # bf16 per 16-byte load
LANES = GROUP // VEC  # threads per (token, group)
THREADS = 256
GROUPS_PER_CTA = THREADS // LANES
FP8_MAX = 448.0
GROUP_EPS = 1e-10


@cute.kernel
def _quant_kernel(mX: cute.Tensor, mA: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    groups = cute.size(mX, mode=[0])
    grp = bidx * GROUPS_PER_CTA + tidx // LANES
    lane = tidx % LANES
    # ((1, VEC), (groups, LANES)) views: one 16-byte bf16 vector in, one 32-byte float32 vector out
    gX = cute.zipped_divide(mX, (1, VEC))
    gA = cute.zipped_divide(mA, (1, VEC))
    rX = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    rX.fill(0.0)
    if grp < groups:
        cute.autovec_copy(gX[(0, None), (grp, lane)], rX)
    x = rX.load().to(cutlass.Float32)
    amax = cutlass.Float32(0.0)
    for i in cutlass.range_constexpr(VEC):
        amax = cute.arch.fmax(amax, cute.math.absf(x[i]))
    # every lane shuffles (out-of-range groups carry zeros), so full-mask shuffles are safe
    for i in cutlass.range_constexpr(4):
        amax = cute.arch.fmax(amax, cute.arch.shuffle_sync_bfly(amax, offset=(LANES // 2) >> i))
    scale = cute.arch.fmax(amax, cutlass.Float32(GROUP_EPS)) / cutlass.Float32(FP8_MAX)
    rF = cute.make_rmem_tensor((VEC,), cutlass.Float32)
    for i in cutlass.range_constexpr(VEC):
        rF[i] = cute.arch.fmin(cute.arch.fmax(x[i] / scale, cutlass.Float32(-FP8_MAX)), cutlass.Float32(FP8_MAX))
    rQ = cute.make_rmem_tensor((VEC,), cutlass.Float8E4M3FN)
    rQ.store(rF.load().to(cutlass.Float8E4M3FN))
    rA = cute.make_rmem_tensor((VEC,), cutlass.Float32)
    rA.store(rQ.load().to(cutlass.Float32) * scale)
    if grp < groups:
        cute.autovec_copy(rA, gA[(0, None), (grp, lane)])


@cute.jit
def _quant(mX: cute.Tensor, mA: cute.Tensor):
    groups = cute.size(mX, mode=[0])
    _quant_kernel(mX, mA).launch(grid=[(groups + GROUPS_PER_CTA - 1) // GROUPS_PER_CTA, 1, 1], block=[THREADS, 1, 1])


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        groups = cute.sym_int()
        x = make_fake_compact_tensor(cutlass.BFloat16, (groups, GROUP), stride_order=(1, 0), assumed_align=16)
        a = make_fake_compact_tensor(cutlass.Float32, (groups, GROUP), stride_order=(1, 0), assumed_align=16)
        _COMPILED.append(cute.compile(_quant, x, a, options="--enable-tvm-ffi"))
    return _COMPILED[0]


def run(attn_output: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor) -> torch.Tensor:
    kernel = _compiled()
    tokens = attn_output.shape[0]
    k = attn_output.shape[1] * attn_output.shape[2]
    groups = tokens * (k // GROUP)
    act = torch.empty((tokens, k), dtype=torch.float32, device=attn_output.device)
    kernel(attn_output.contiguous().view(groups, GROUP), act.view(groups, GROUP))
    # eager: 128x128 tile-scaled weight, then the float32 GEMM (fp8 products are exact in float32)
    n = weight.shape[0]
    tile = weight_scale.repeat_interleave(GROUP, dim=0)[:n].repeat_interleave(GROUP, dim=1)[:, :k]
    return (act @ (weight.float() * tile).t()).to(attn_output.dtype)
