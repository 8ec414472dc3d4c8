"""MLA KV-cache row epilogue of p56 in CuTe DSL: RMSNorm of the 512 latent, RoPE of the 64 rope values, fp8 requant.

Shared by p56's plans (DESIGN §5). Input kv [tokens, 576] float32 (the kv_a_proj GEMM result), output
the fp8 cache row through a uint8 view. One warp per token, 8 tokens per 256-thread CTA. Lane l owns
latent columns 16l .. 16l+15 (four 16-byte loads, plus two of the bf16 norm weight); the sum of
squares is reduced over the warp with butterfly shuffles and c · rsqrt(mean + 1e-6) · w is formed in
float32 (the reference's order). Lanes 0..15 also own 4 rope values (two interleaved pairs, rotated
with cos/sin of the token's position). Every value is divided by the cache scale (IEEE division),
clamped to ±448 and converted to e4m3 (nearest even); the codes leave as one 16-byte store per lane
(latent) and one 4-byte store (rope).
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor

N = 576
RANK = 512
ROPE = 64
GROUP = 128
PER_LANE = RANK // 32  # latent columns per lane
ROPE_VEC = 4  # rope values per rope lane
ROPE_LANES = ROPE // ROPE_VEC
THREADS = 256
TOKENS_PER_CTA = THREADS // 32
FP8_MAX = 448.0
EPS = 1e-6


@cute.jit
def _to_fp8(rF: cute.Tensor, dst: cute.Tensor, n: cutlass.Constexpr):
    for i in cutlass.range_constexpr(n):
        rF[i] = cute.arch.fmin(cute.arch.fmax(rF[i], cutlass.Float32(-FP8_MAX)), cutlass.Float32(FP8_MAX))
    rQ = cute.make_rmem_tensor((n,), cutlass.Float8E4M3FN)
    rQ.store(rF.load().to(cutlass.Float8E4M3FN))
    cute.autovec_copy(cute.recast_tensor(rQ, cutlass.Uint8), dst)


@cute.kernel
def _epilogue_kernel(
    mKV: cute.Tensor,
    mW: cute.Tensor,
    mPos: cute.Tensor,
    mCS: cute.Tensor,
    mSC: cute.Tensor,
    mOut: cute.Tensor,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    tokens = cute.size(mKV, mode=[0])
    tok = bidx * TOKENS_PER_CTA + tidx // 32
    lane = tidx % 32
    # ((1, 16), (rows, 36)) latent tiles and ((1, 4), (rows, 144)) rope tiles of a row of 576
    gKV = cute.zipped_divide(mKV, (1, PER_LANE))
    gKVr = cute.zipped_divide(mKV, (1, ROPE_VEC))
    gW = cute.zipped_divide(mW, (1, PER_LANE))
    gOut = cute.zipped_divide(mOut, (1, PER_LANE))
    gOutr = cute.zipped_divide(mOut, (1, ROPE_VEC))
    rC = cute.make_rmem_tensor((PER_LANE,), cutlass.Float32)
    rW = cute.make_rmem_tensor((PER_LANE,), cutlass.BFloat16)
    rC.fill(0.0)
    if tok < tokens:
        cute.autovec_copy(gKV[(0, None), (tok, lane)], rC)
    cute.autovec_copy(gW[(0, None), (0, lane)], rW)
    c = rC.load()
    ss = (c * c).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), reduction_profile=0)
    # every lane shuffles (rows past the end carry zeros), so full-mask shuffles are safe
    for i in cutlass.range_constexpr(5):
        ss = ss + cute.arch.shuffle_sync_bfly(ss, offset=16 >> i)
    inv = cute.math.rsqrt(ss * cutlass.Float32(1.0 / RANK) + cutlass.Float32(EPS))
    scale = mSC[0]
    rF = cute.make_rmem_tensor((PER_LANE,), cutlass.Float32)
    rF.store(c * inv * rW.load().to(cutlass.Float32) / scale)
    if tok < tokens:
        _to_fp8(rF, gOut[(0, None), (tok, lane)], PER_LANE)
        if lane < ROPE_LANES:
            pos = cutlass.Int32(mPos[tok])
            rR = cute.make_rmem_tensor((ROPE_VEC,), cutlass.Float32)
            cute.autovec_copy(gKVr[(0, None), (tok, RANK // ROPE_VEC + lane)], rR)
            rE = cute.make_rmem_tensor((ROPE_VEC,), cutlass.Float32)
            # pairs (2i, 2i+1) for i = 2·lane and 2·lane + 1: x' = x cos − y sin, y' = y cos + x sin
            for p in cutlass.range_constexpr(2):
                cs = mCS[pos, lane * 2 + p]
                sn = mCS[pos, ROPE // 2 + lane * 2 + p]
                rE[p * 2] = (rR[p * 2] * cs - rR[p * 2 + 1] * sn) / scale
                rE[p * 2 + 1] = (rR[p * 2 + 1] * cs + rR[p * 2] * sn) / scale
            _to_fp8(rE, gOutr[(0, None), (tok, RANK // ROPE_VEC + lane)], ROPE_VEC)


@cute.jit
def _epilogue(
    mKV: cute.Tensor,
    mW: cute.Tensor,
    mPos: cute.Tensor,
    mCS: cute.Tensor,
    mSC: cute.Tensor,
    mOut: cute.Tensor,
):
    tokens = cute.size(mKV, mode=[0])
    _epilogue_kernel(mKV, mW, mPos, mCS, mSC, mOut).launch(
        grid=[(tokens + TOKENS_PER_CTA - 1) // TOKENS_PER_CTA, 1, 1], block=[THREADS, 1, 1]
    )


_COMPILED: list = []


def compiled():
    """The epilogue (token count symbolic), compiled once."""
    if not _COMPILED:
        tokens, max_pos = cute.sym_int(), cute.sym_int()
        kv = make_fake_compact_tensor(cutlass.Float32, (tokens, N), stride_order=(1, 0), assumed_align=16)
        w = make_fake_compact_tensor(cutlass.BFloat16, (1, RANK), stride_order=(1, 0), assumed_align=16)
        pos = make_fake_compact_tensor(cutlass.Int64, (tokens,), assumed_align=8)
        cs = make_fake_compact_tensor(cutlass.Float32, (max_pos, ROPE), stride_order=(1, 0), assumed_align=16)
        sc = make_fake_compact_tensor(cutlass.Float32, (1,), assumed_align=4)
        out = make_fake_compact_tensor(cutlass.Uint8, (tokens, N), stride_order=(1, 0), assumed_align=16)
        _COMPILED.append(cute.compile(_epilogue, kv, w, pos, cs, sc, out, options="--enable-tvm-ffi"))
    return _COMPILED[0]


def cache_row(
    kv: torch.Tensor,
    kv_norm_weight: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    kv_cache_scale: torch.Tensor,
) -> torch.Tensor:
    """The fp8 cache rows [tokens, 576] of kv [tokens, 576] float32."""
    out = torch.empty((kv.shape[0], N), dtype=torch.float8_e4m3fn, device=kv.device)
    # the scale stays on the device (no .item() sync); the fp8 row is written through a uint8 view
    compiled()(
        kv,
        kv_norm_weight.contiguous().view(1, RANK),
        positions.contiguous(),
        cos_sin_cache.contiguous(),
        kv_cache_scale.float().reshape(1),
        out.view(torch.uint8),
    )
    return out
