"""p09 gqa_ragged_prefill_causal_h8_kv1_d256_bf16 — plan `fused`, CuTe DSL: flash attention (mma.sync).

Plan: the shared CuTe DSL template `_flash_prefill_cutedsl.py` (FlashAttention-2 forward; index math in
`_flash_prefill.py`) instantiated for 8 query / 1 KV heads, head dim 256, ragged K/V. One CTA of 4 warps per
(sequence, query tile of 64 rows, query head): a grid of 136 query tiles at most x 8 heads, heads fastest so
the 8 query heads of a KV head read its K/V tiles while they are in L2. K/V tiles of 64 tokens (contiguous
rows of the sequence) are copied with 16-byte cp.async into swizzled shared memory (V(n) while Q·K(n)ᵀ runs,
K(n-1) while the softmax and P·V(n) run); Q·Kᵀ and P·V on mma.sync m16n8k16 (bf16 -> fp32) fed by ldmatrix.x4;
base-2 online softmax in fp32 with the end-aligned causal mask only on the tiles crossing the diagonal; O / l
rounded to bf16 and written as 16-byte row stores; lse = m + log2(l). Compute-bound: 52 GFLOP of bf16 matmul
at WORKLOAD.
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared template beside this file
from _flash_prefill import Tiling
from _flash_prefill_cutedsl import FlashPrefill

_PREFILL = FlashPrefill(Tiling(hq=8, hkv=1, d=256, page=0))


def _compiled():
    return _PREFILL.compiled()


def run(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    # ragged K/V: rows are contiguous per sequence, so kv_indptr fills the unused page-table slots
    return _PREFILL(q, k, v, qo_indptr, kv_indptr, kv_indptr, kv_indptr, sm_scale)
