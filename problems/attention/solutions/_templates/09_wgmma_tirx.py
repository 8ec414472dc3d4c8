"""p09 gqa_ragged_prefill_causal_h8_kv1_d256_bf16 — plan `wgmma`, TIRx: flash attention (WGMMA, sm_90a).

Plan: the shared TIRx sm_90a template (FlashAttention-3's consumer schedule on WGMMA;
`_templates/flash_prefill_wgmma_tirx.py` and its layouts in `_templates/flash_prefill_sm90.py`, inlined in this
file) instantiated for 8 query / 1 KV heads, head dim 256, ragged K/V. One CTA of two warpgroups per (sequence,
query tile of 128 rows, query head), heads fastest so the query heads of a KV head read its K/V tiles while they
are in L2. K/V tiles of 64 tokens (contiguous rows of the sequence) are copied with 16-byte cp.async, two tiles
deep, into the 128-byte-swizzle layout wgmma reads through matrix descriptors; each warpgroup issues S(j) =
Q·K(j)ᵀ (m64n64k16, operands in shared memory) and O += P(j-1)·V(j-1) (m64n256k16, P from registers, V
transposed) and runs the base-2 online softmax of S(j) while P(j-1)·V(j-1) is on the tensor cores; the
end-aligned causal mask only on tiles crossing the diagonal; O / l rounded to bf16 and written as 16-byte row
stores; lse = m + log2(l). Compute-bound: 52 GFLOP of bf16 matmul at WORKLOAD.
"""

import torch
from flash_prefill_sm90 import Sm90Tiling
from flash_prefill_wgmma_tirx import FlashPrefillSm90

_PREFILL = FlashPrefillSm90(Sm90Tiling(hq=8, hkv=1, d=256, page=0))


def _shape_key(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, qo_indptr: torch.Tensor, kv_indptr: torch.Tensor, *_: object
) -> tuple[int, int, int, int, int]:
    return _PREFILL.shape_key(q, k, qo_indptr, kv_indptr, kv_indptr)


def _build(*key: int):
    return _PREFILL.build(*key)


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
