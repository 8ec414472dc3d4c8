"""p06 gqa_paged_prefill_causal_h24_kv8_d128_ps64_bf16 — plan `wgmma`, TIRx: flash attention (WGMMA, sm_90a).

Plan: the shared TIRx sm_90a template (FlashAttention-3's consumer schedule on WGMMA;
`_templates/flash_prefill_wgmma_tirx.py` and its layouts in `_templates/flash_prefill_sm90.py`, inlined in this
file) instantiated for 24 query / 8 KV heads, head dim 128, page size 64. One CTA of two warpgroups per
(sequence, query tile of 128 rows, query head), heads fastest so the query heads of a KV head read its K/V tiles
while they are in L2. K/V tiles of 128 tokens (pool rows through the page table, staged in a ring of row lists
in shared memory) are copied with 16-byte cp.async, two tiles deep, into the 128-byte-swizzle layout wgmma reads
through matrix descriptors; each warpgroup issues S(j) = Q·K(j)ᵀ (m64n128k16, operands in shared memory) and O
+= P(j-1)·V(j-1) (m64n128k16, P from registers, V transposed) and runs the base-2 online softmax of S(j) while
P(j-1)·V(j-1) is on the tensor cores; the end-aligned causal mask only on tiles crossing the diagonal; O / l
rounded to bf16 and written as 16-byte row stores; lse = m + log2(l). Compute-bound: 151 GFLOP of bf16 matmul at
WORKLOAD.
"""

import torch
from flash_prefill_sm90 import Sm90Tiling
from flash_prefill_wgmma_tirx import FlashPrefillSm90

_PREFILL = FlashPrefillSm90(Sm90Tiling(hq=24, hkv=8, d=128, page=64))


def _shape_key(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, qo_indptr: torch.Tensor, kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor, kv_last_page_len: torch.Tensor, *_: object,
) -> tuple[int, int, int, int, int]:  # fmt: skip
    return _PREFILL.shape_key(q, k_cache, qo_indptr, kv_indices, kv_last_page_len)


def _build(*key: int):
    return _PREFILL.build(*key)


def run(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    kv_last_page_len: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    return _PREFILL(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, sm_scale)
