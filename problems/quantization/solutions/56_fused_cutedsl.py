"""p56 mla_kv_compression_requant_deepseekv31_fp8 — plan `fused`, CuTe DSL: UE8M0 activation-quant kernel + FP8 WGMMA
GEMM + cache-row epilogue kernel.

Plan: three CuTe DSL kernels, all of the op. (1) The activation quantiser (problems/_fp8quant_cutedsl.py)
with UE8M0 scales: per (token, 128-channel group) s = 2^ceil(log2(amax / 448)) from the float bits,
q = fp8(x / s). (2) The block-FP8 GEMM of `_fp8linear_cutedsl.py` with a float32 output kv [T, 576]:
128 x 128 CTA tiles, two warpgroups of m64n128k32 WGMMAs fed by TMA through a 6-deep mbarrier ring,
per-k-tile promotion with s_act * s_w (exact: both powers of two); N = 576 is 4.5 tiles, TMA
zero-fills the missing weight rows of the last column tile and only columns < 576 are stored. (3) The
epilogue kernel `_mla_epilogue_cutedsl.py` (one warp per token): RMSNorm of the 512 latent, RoPE of the
64 rope values at the token's position, / kv_cache_scale, e4m3 rounding, 16-byte stores of the row.
Symbolic sizes: each kernel compiled once.
"""

import torch

from problems.quantization.solutions import _fp8linear_cutedsl as L
from problems.quantization.solutions import _mla_epilogue_cutedsl as E


def _compiled():
    return (*L.compiled(torch.float32, ue8m0=True), E.compiled())


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
