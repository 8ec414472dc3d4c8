"""p56 mla_kv_compression_requant_deepseekv31_fp8 — plan `quantgemmeager_epiloguekernel`, TIRx (partial).

Plan (partial): the UE8M0 per-token-group activation quantisation and the block-FP8 GEMM stay eager,
written with the reference's own float32 ops (dequantise, then `a @ W.T`; fp8 products are exact in
float32), giving kv [tokens, 576] float32. The TIRx kernel is the epilogue that makes the cache row:
one warp per token, 8 tokens per 256-thread CTA. Lane l owns latent columns 16l .. 16l+15 (four
16-byte loads, plus two of the bf16 norm weight); the sum of squares is reduced over the warp with
butterfly shuffles and c · rsqrt(mean + 1e-6) · w is formed in float32 (the reference's order).
Lanes 0..15 also own 4 rope values (two interleaved pairs, rotated with cos/sin of the token's
position). Every value is divided by the cache scale, clamped to ±448 and rounded to e4m3 (nearest
even), four codes per 32-bit word, so the row goes out as one 16-byte store per lane (latent) and one
4-byte store (rope). The fp8 output travels as an int32 view (no fp8 DLPack). Missing for a full
plan: the FP8 tensor-core GEMM with per-group rescaling and this epilogue fused behind it.
Compiled once per token count.
"""

import torch
import tvm

from problems.quantization.solutions import _mla_epilogue_tirx as E

GROUP = 128
FP8_MAX = 448.0


def _build(tokens: int, max_pos: int) -> tvm.runtime.Module:
    return E.build(tokens, max_pos)


def _shape_key(
    hidden_states: torch.Tensor, kv_a_weight: torch.Tensor, kv_a_scale: torch.Tensor, kv_norm_weight: torch.Tensor,
    positions: torch.Tensor, cos_sin_cache: torch.Tensor, *_: object,
) -> tuple[int, int]:  # fmt: skip
    return hidden_states.shape[0], cos_sin_cache.shape[0]


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
