"""p56 mla_kv_compression_requant_deepseekv31_fp8 — plan `fused`, TIRx: UE8M0 activation-quant kernel + FP8 WGMMA GEMM
+ cache-row epilogue kernel.

Plan: three TIRx kernels, all of the op. (1) `act_quant` with UE8M0 scales (problems/_wgmma_tirx.py):
per (token, 128-channel group) s = 2^ceil(log2(amax / 448)) from the float bits, q = fp8(x / s).
(2) The block-FP8 GEMM of `_fp8linear_tirx.py` with a float32 output kv [T, 576]: 128 x 128 CTA
tiles (two warpgroups of m64n128k32 WGMMAs, cp.async into a 6-deep 128B-swizzled ring, per-k-tile
promotion with s_act * s_w, exact here since both are powers of two); N = 576 is 4.5 tiles, so the
last column tile reads the last weight row for its missing half and stores only columns < 576. (3) The
epilogue kernel `_mla_epilogue_tirx.py` (one warp per token): RMSNorm of the 512 latent, RoPE of the
64 rope values at the token's position, / kv_cache_scale, e4m3 rounding, 16-byte stores of the row.
Compiled once per (tokens, max_position).
"""

import torch

from problems.quantization.solutions import _fp8linear_tirx as L
from problems.quantization.solutions import _mla_epilogue_tirx as E

HIDDEN = 7168


def _shape_key(hidden_states: torch.Tensor, *inputs: object) -> tuple[int, int]:
    cos_sin_cache = inputs[4]
    assert isinstance(cos_sin_cache, torch.Tensor)
    return hidden_states.shape[0], cos_sin_cache.shape[0]


def _build(tokens: int, max_pos: int) -> tuple:
    return (*L.build(tokens, HIDDEN, E.N, "float32", ue8m0=True), E.build(tokens, max_pos))


def run(
    hidden_states: torch.Tensor,
    kv_a_weight: torch.Tensor,
    kv_a_scale: torch.Tensor,
    kv_norm_weight: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    kv_cache_scale: torch.Tensor,
) -> torch.Tensor:
    kv = L.linear(hidden_states, kv_a_weight, kv_a_scale, torch.float32, ue8m0=True)
    return E.cache_row(kv, kv_norm_weight, positions, cos_sin_cache, kv_cache_scale)
