"""Batched GQA decode over a paged KV cache (page size 64), 32 q / 8 kv heads, head dim 128, bf16."""

# Source: FlashInfer-Trace definition `gqa_paged_decode_h32_kv8_d128_ps64`
#   (flashinfer-ai/flashinfer-bench, flashinfer_trace/definitions/gqa_paged/
#   gqa_paged_decode_h32_kv8_d128_ps64.json);
#   outputs `output` and the base-2 `lse`, as there.
# Upstream: flashinfer.decode.BatchDecodeWithPagedKVCacheWrapper (return_lse=True).
# Production shape: Llama-3.1-8B (32 q heads, 8 kv heads, head_dim 128, TP1) decode step of 64
#   sequences on 2048 pages of 64 tokens (~2030 tokens each on average) in a 2304-page pool.

from __future__ import annotations

import torch

from problems._common import Cost
from problems.attention import _gqa

ID = "p03"
NAME = "gqa_paged_decode_h32_kv8_d128_ps64_bf16"
FAMILY = "attention"
SOURCE = "FI"
DESCRIPTION = _gqa.decode_description(32, 8, 128, 64)
NOTES = ""
TOLERANCE_NOTE = _gqa.TOLERANCE_NOTE
AXES = {
    "batch_size": "var",
    "num_qo_heads": 32,
    "num_kv_heads": 8,
    "head_dim": 128,
    "num_pages": "var",
    "page_size": 64,
    "len_indptr": "var",
    "num_kv_indices": "var",
}
INPUTS = {
    "q": (("batch_size", "num_qo_heads", "head_dim"), "bfloat16"),
    "k_cache": (("num_pages", "page_size", "num_kv_heads", "head_dim"), "bfloat16"),
    "v_cache": (("num_pages", "page_size", "num_kv_heads", "head_dim"), "bfloat16"),
    "kv_indptr": (("len_indptr",), "int32"),
    "kv_indices": (("num_kv_indices",), "int32"),
    "kv_last_page_len": (("batch_size",), "int32"),
    "sm_scale": (None, "float32"),
}
OUTPUTS = {
    "output": (("batch_size", "num_qo_heads", "head_dim"), "bfloat16"),
    "lse": (("batch_size", "num_qo_heads"), "float32"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "num_qo_heads": 32,
    "num_kv_heads": 8,
    "head_dim": 128,
    "page_size": 64,
    "batch_size": 64,
    "len_indptr": 65,
    "num_kv_indices": 2048,
    "num_pages": 2304,
}
SMOKE = {
    "num_qo_heads": 32,
    "num_kv_heads": 8,
    "head_dim": 128,
    "page_size": 64,
    "batch_size": 4,
    "len_indptr": 5,
    "num_kv_indices": 10,
    "num_pages": 18,
}


def make_inputs(
    workload: dict[str, int], *, seed: int, device: str = "cpu"
) -> tuple[torch.Tensor | float, ...]:
    return _gqa.make_decode_inputs(workload, seed=seed, device=device, with_last_page_len=True)


def reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    kv_last_page_len: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    return _gqa.paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len, sm_scale)


def cost(workload: dict[str, int]) -> Cost:
    return _gqa.decode_cost(workload, with_last_page_len=True)


def input_cost(workload: dict[str, int], inputs: tuple[object, ...]) -> Cost:
    return _gqa.decode_cost(workload, with_last_page_len=True, inputs=inputs)
