"""Batched causal GQA prefill over a paged KV cache (page size 64), 24 q / 8 kv heads, head dim 128, bf16."""

# Source: FlashInfer-Trace definition `gqa_paged_prefill_causal_h24_kv8_d128_ps64`
#   (flashinfer-ai/flashinfer-bench, flashinfer_trace/definitions/gqa_paged/
#   gqa_paged_prefill_causal_h24_kv8_d128_ps64.json);
#   outputs `output` and the base-2 `lse`, as there.
# Upstream: flashinfer.prefill.BatchPrefillWithPagedKVCacheWrapper (causal=True, return_lse=True).
# Production shape: Llama-3.2-3B (24 q heads, 8 kv heads, head_dim 128, TP1) chunked prefill of
#   8192 new tokens over 8 sequences whose KV fills 256 pages of 64 tokens (~16100 tokens) in a
#   288-page pool.
# Deviation: the definition gives `kv_last_page_len` the shape [len_indptr]; FlashInfer's API and the
#   decode definitions use [batch_size] (one entry per sequence), as here.

from __future__ import annotations

import torch

from problems._common import Cost
from problems.attention import _gqa

ID = "p06"
NAME = "gqa_paged_prefill_causal_h24_kv8_d128_ps64_bf16"
FAMILY = "attention"
SOURCE = "FI"
DESCRIPTION = _gqa.paged_prefill_description(24, 8, 128, 64)
NOTES = ""
TOLERANCE_NOTE = _gqa.TOLERANCE_NOTE
AXES = {
    "num_qo_heads": 24,
    "num_kv_heads": 8,
    "head_dim": 128,
    "page_size": 64,
    "len_indptr": "var",
    "batch_size": "var",
    "total_q": "var",
    "num_kv_indices": "var",
    "num_pages": "var",
}
INPUTS = {
    "q": (("total_q", "num_qo_heads", "head_dim"), "bfloat16"),
    "k_cache": (("num_pages", "page_size", "num_kv_heads", "head_dim"), "bfloat16"),
    "v_cache": (("num_pages", "page_size", "num_kv_heads", "head_dim"), "bfloat16"),
    "qo_indptr": (("len_indptr",), "int32"),
    "kv_indptr": (("len_indptr",), "int32"),
    "kv_indices": (("num_kv_indices",), "int32"),
    "kv_last_page_len": (("batch_size",), "int32"),
    "sm_scale": (None, "float32"),
}
OUTPUTS = {
    "output": (("total_q", "num_qo_heads", "head_dim"), "bfloat16"),
    "lse": (("total_q", "num_qo_heads"), "float32"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "num_qo_heads": 24,
    "num_kv_heads": 8,
    "head_dim": 128,
    "page_size": 64,
    "len_indptr": 9,
    "batch_size": 8,
    "total_q": 8192,
    "num_kv_indices": 256,
    "num_pages": 288,
}
SMOKE = {
    "num_qo_heads": 24,
    "num_kv_heads": 8,
    "head_dim": 128,
    "page_size": 64,
    "len_indptr": 4,
    "batch_size": 3,
    "total_q": 100,
    "num_kv_indices": 7,
    "num_pages": 15,
}


def make_inputs(
    workload: dict[str, int], *, seed: int, device: str = "cpu"
) -> tuple[torch.Tensor | float, ...]:
    return _gqa.make_paged_prefill_inputs(workload, seed=seed, device=device, with_last_page_len=True)


def reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    kv_last_page_len: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    return _gqa.paged_prefill(
        q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, sm_scale
    )


def cost(workload: dict[str, int]) -> Cost:
    return _gqa.paged_prefill_cost(workload, with_last_page_len=True)


def input_cost(workload: dict[str, int], inputs: tuple[object, ...]) -> Cost:
    return _gqa.paged_prefill_cost(workload, with_last_page_len=True, inputs=inputs)
