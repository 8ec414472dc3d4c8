"""p56 mla_kv_compression_requant_deepseekv31_fp8 — plan `quantgemmeager_epiloguekernel`, CuTe DSL (partial).

Plan (partial): the UE8M0 per-token-group activation quantisation and the block-FP8 GEMM stay eager,
written with the reference's own float32 ops (dequantise, then `a @ W.T`; fp8 products are exact in
float32), giving kv [tokens, 576] float32. The CuTe DSL kernel is the epilogue that makes the cache
row: one warp per token, 8 tokens per 256-thread CTA. Lane l owns latent columns 16l .. 16l+15 (four
16-byte loads, plus two of the bf16 norm weight); the sum of squares is reduced over the warp with
butterfly shuffles and c · rsqrt(mean + 1e-6) · w is formed in float32 (the reference's order).
Lanes 0..15 also own 4 rope values (two interleaved pairs, rotated with cos/sin of the token's
position). Every value is divided by the cache scale (IEEE division), clamped to ±448 and converted to
e4m3 (nearest even); the codes leave as one 16-byte store per lane (latent) and one 4-byte store
(rope) through a uint8 view (no fp8 DLPack). Missing for a full plan: the FP8 tensor-core GEMM with
per-group rescaling and this epilogue fused behind it. Token count symbolic: one compilation, cached.
"""

from types import SimpleNamespace

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor

# bundle: problems/quantization/solutions/_mla_epilogue_cutedsl.py as E

# ---- bundled shared kernel code (python -m problems._bundle; edit the source modules) ----

# problems/quantization/solutions/_mla_epilogue_cutedsl.py
_E_N = 576
_E_RANK = 512
_E_ROPE = 64
_E_GROUP = 128
_E_PER_LANE = _E_RANK // 32  # latent columns per lane
_E_ROPE_VEC = 4  # rope values per rope lane
_E_ROPE_LANES = _E_ROPE // _E_ROPE_VEC
_E_THREADS = 256
_E_TOKENS_PER_CTA = _E_THREADS // 32
_E_FP8_MAX = 448.0
_E_EPS = 1e-6


@cute.jit
def _E__to_fp8(rF: cute.Tensor, dst: cute.Tensor, n: cutlass.Constexpr):
    for i in cutlass.range_constexpr(n):
        rF[i] = cute.arch.fmin(cute.arch.fmax(rF[i], cutlass.Float32(-_E_FP8_MAX)), cutlass.Float32(_E_FP8_MAX))
    rQ = cute.make_rmem_tensor((n,), cutlass.Float8E4M3FN)
    rQ.store(rF.load().to(cutlass.Float8E4M3FN))
    cute.autovec_copy(cute.recast_tensor(rQ, cutlass.Uint8), dst)


@cute.kernel
def _E__epilogue_kernel(
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
    tok = bidx * _E_TOKENS_PER_CTA + tidx // 32
    lane = tidx % 32
    # ((1, 16), (rows, 36)) latent tiles and ((1, 4), (rows, 144)) rope tiles of a row of 576
    gKV = cute.zipped_divide(mKV, (1, _E_PER_LANE))
    gKVr = cute.zipped_divide(mKV, (1, _E_ROPE_VEC))
    gW = cute.zipped_divide(mW, (1, _E_PER_LANE))
    gOut = cute.zipped_divide(mOut, (1, _E_PER_LANE))
    gOutr = cute.zipped_divide(mOut, (1, _E_ROPE_VEC))
    rC = cute.make_rmem_tensor((_E_PER_LANE,), cutlass.Float32)
    rW = cute.make_rmem_tensor((_E_PER_LANE,), cutlass.BFloat16)
    rC.fill(0.0)
    if tok < tokens:
        cute.autovec_copy(gKV[(0, None), (tok, lane)], rC)
    cute.autovec_copy(gW[(0, None), (0, lane)], rW)
    c = rC.load()
    ss = (c * c).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), reduction_profile=0)
    # every lane shuffles (rows past the end carry zeros), so full-mask shuffles are safe
    for i in cutlass.range_constexpr(5):
        ss = ss + cute.arch.shuffle_sync_bfly(ss, offset=16 >> i)
    inv = cute.math.rsqrt(ss * cutlass.Float32(1.0 / _E_RANK) + cutlass.Float32(_E_EPS))
    scale = mSC[0]
    rF = cute.make_rmem_tensor((_E_PER_LANE,), cutlass.Float32)
    rF.store(c * inv * rW.load().to(cutlass.Float32) / scale)
    if tok < tokens:
        _E__to_fp8(rF, gOut[(0, None), (tok, lane)], _E_PER_LANE)
        if lane < _E_ROPE_LANES:
            pos = cutlass.Int32(mPos[tok])
            rR = cute.make_rmem_tensor((_E_ROPE_VEC,), cutlass.Float32)
            cute.autovec_copy(gKVr[(0, None), (tok, _E_RANK // _E_ROPE_VEC + lane)], rR)
            rE = cute.make_rmem_tensor((_E_ROPE_VEC,), cutlass.Float32)
            # pairs (2i, 2i+1) for i = 2·lane and 2·lane + 1: x' = x cos − y sin, y' = y cos + x sin
            for p in cutlass.range_constexpr(2):
                cs = mCS[pos, lane * 2 + p]
                sn = mCS[pos, _E_ROPE // 2 + lane * 2 + p]
                rE[p * 2] = (rR[p * 2] * cs - rR[p * 2 + 1] * sn) / scale
                rE[p * 2 + 1] = (rR[p * 2 + 1] * cs + rR[p * 2] * sn) / scale
            _E__to_fp8(rE, gOutr[(0, None), (tok, _E_RANK // _E_ROPE_VEC + lane)], _E_ROPE_VEC)


@cute.jit
def _E__epilogue(
    mKV: cute.Tensor,
    mW: cute.Tensor,
    mPos: cute.Tensor,
    mCS: cute.Tensor,
    mSC: cute.Tensor,
    mOut: cute.Tensor,
):
    tokens = cute.size(mKV, mode=[0])
    _E__epilogue_kernel(mKV, mW, mPos, mCS, mSC, mOut).launch(
        grid=[(tokens + _E_TOKENS_PER_CTA - 1) // _E_TOKENS_PER_CTA, 1, 1], block=[_E_THREADS, 1, 1]
    )


_E__COMPILED: list = []


def _E_compiled():
    """The epilogue (token count symbolic), compiled once."""
    if not _E__COMPILED:
        tokens, max_pos = cute.sym_int(), cute.sym_int()
        kv = make_fake_compact_tensor(cutlass.Float32, (tokens, _E_N), stride_order=(1, 0), assumed_align=16)
        w = make_fake_compact_tensor(cutlass.BFloat16, (1, _E_RANK), stride_order=(1, 0), assumed_align=16)
        pos = make_fake_compact_tensor(cutlass.Int64, (tokens,), assumed_align=8)
        cs = make_fake_compact_tensor(cutlass.Float32, (max_pos, _E_ROPE), stride_order=(1, 0), assumed_align=16)
        sc = make_fake_compact_tensor(cutlass.Float32, (1,), assumed_align=4)
        out = make_fake_compact_tensor(cutlass.Uint8, (tokens, _E_N), stride_order=(1, 0), assumed_align=16)
        _E__COMPILED.append(cute.compile(_E__epilogue, kv, w, pos, cs, sc, out, options="--enable-tvm-ffi"))
    return _E__COMPILED[0]


def _E_cache_row(
    kv: torch.Tensor,
    kv_norm_weight: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    kv_cache_scale: torch.Tensor,
) -> torch.Tensor:
    """The fp8 cache rows [tokens, 576] of kv [tokens, 576] float32."""
    out = torch.empty((kv.shape[0], _E_N), dtype=torch.float8_e4m3fn, device=kv.device)
    # the scale stays on the device (no .item() sync); the fp8 row is written through a uint8 view
    _E_compiled()(
        kv,
        kv_norm_weight.contiguous().view(1, _E_RANK),
        positions.contiguous(),
        cos_sin_cache.contiguous(),
        kv_cache_scale.float().reshape(1),
        out.view(torch.uint8),
    )
    return out


E = SimpleNamespace(
    N=_E_N,
    RANK=_E_RANK,
    ROPE=_E_ROPE,
    GROUP=_E_GROUP,
    PER_LANE=_E_PER_LANE,
    ROPE_VEC=_E_ROPE_VEC,
    ROPE_LANES=_E_ROPE_LANES,
    THREADS=_E_THREADS,
    TOKENS_PER_CTA=_E_TOKENS_PER_CTA,
    FP8_MAX=_E_FP8_MAX,
    EPS=_E_EPS,
    _to_fp8=_E__to_fp8,
    _epilogue_kernel=_E__epilogue_kernel,
    _epilogue=_E__epilogue,
    _COMPILED=_E__COMPILED,
    compiled=_E_compiled,
    cache_row=_E_cache_row,
)

# ---- end of bundle ----


GROUP = 128
FP8_MAX = 448.0


def _compiled():
    return E.compiled()


def _kv_eager(hidden_states: torch.Tensor, kv_a_weight: torch.Tensor, kv_a_scale: torch.Tensor) -> torch.Tensor:
    """UE8M0 per-token-group quantisation + block-FP8 GEMM, the reference's float32 ops."""
    t, k = hidden_states.shape
    n = kv_a_weight.shape[0]
    g = hidden_states.float().view(t, k // GROUP, GROUP)
    s = g.abs().amax(dim=-1).clamp_min(1e-10) / FP8_MAX
    mant, expo = torch.frexp(s)  # round the scale up to a power of two, exactly
    s = torch.ldexp(torch.ones_like(s), torch.where(mant == 0.5, expo - 1, expo))
    q = (g / s.unsqueeze(-1)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    a = (q.float() * s.unsqueeze(-1)).view(t, k)
    tile = kv_a_scale.repeat_interleave(GROUP, dim=0)[:n].repeat_interleave(GROUP, dim=1)[:, :k]
    return a @ (kv_a_weight.float() * tile).t()


def run(
    hidden_states: torch.Tensor,
    kv_a_weight: torch.Tensor,
    kv_a_scale: torch.Tensor,
    kv_norm_weight: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    kv_cache_scale: torch.Tensor,
) -> torch.Tensor:
    return E.cache_row(
        _kv_eager(hidden_states, kv_a_weight, kv_a_scale), kv_norm_weight, positions, cos_sin_cache, kv_cache_scale
    )
