"""p05 gqa_paged_prefill_causal_h5_kv1_d128_ps1_bf16 — plan `fused`, CuTe DSL: flash attention (mma.sync).

Plan: the shared CuTe DSL template `_flash_prefill_cutedsl.py` (FlashAttention-2 forward; index math in
`_flash_prefill.py`) instantiated for 5 query / 1 KV heads, head dim 128, page size 1. One CTA of 4 warps per
(sequence, query tile of 128 rows, query head): a grid of 72 query tiles at most x 5 heads, heads fastest so
the 5 query heads of a KV head read its K/V tiles while they are in L2. K/V tiles of 64 tokens (pool rows read
from the page table, one token a thread, into shared memory) are copied with 16-byte cp.async into swizzled
shared memory (V(n) while Q·K(n)ᵀ runs, K(n-1) while the softmax and P·V(n) run); Q·Kᵀ and P·V on
mma.sync m16n8k16 (bf16 -> fp32) fed by ldmatrix.x4; base-2 online softmax in fp32 with the end-aligned causal
mask only on the tiles crossing the diagonal; O / l rounded to bf16 and written as 16-byte row stores; lse = m
+ log2(l). Compute-bound: 32 GFLOP of bf16 matmul at WORKLOAD.
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared template beside this file
from _flash_prefill import Tiling
from _flash_prefill_cutedsl import FlashPrefill

_PREFILL = FlashPrefill(Tiling(hq=5, hkv=1, d=128, page=1))


def _compiled():
    return _PREFILL.compiled()


def run(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    # page size 1: every page is full, so kv_indptr fills the unused kv_last_page_len slot
    return _PREFILL(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, kv_indptr, sm_scale)
