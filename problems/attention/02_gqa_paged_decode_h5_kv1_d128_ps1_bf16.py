"""Batched GQA decode over a paged KV cache (page size 1), 5 q / 1 kv head, head dim 128, bf16."""

# Source: FlashInfer-Trace definition `gqa_paged_decode_h5_kv1_d128_ps1`
#   (flashinfer-ai/flashinfer-bench, flashinfer_trace/definitions/gqa_paged/
#   gqa_paged_decode_h5_kv1_d128_ps1.json);
#   outputs `output` and the base-2 `lse`, as there.
# Upstream: flashinfer.decode.BatchDecodeWithPagedKVCacheWrapper (return_lse=True).
# Production shape: Llama-4-Scout (40 q heads, 8 kv heads, head_dim 128) at TP8 -> 5 q / 1 kv head
#   per GPU; decode step of 128 sequences with 2048 cached tokens on average (262144 one-token
#   pages) in a 294912-page pool.

from __future__ import annotations

import torch

from problems._common import Cost
from problems.attention import _gqa

ID = "p02"
NAME = "gqa_paged_decode_h5_kv1_d128_ps1_bf16"
FAMILY = "attention"
SOURCE = "FI"
DESCRIPTION = _gqa.decode_description(5, 1, 128, 1)
NOTES = ""
TOLERANCE_NOTE = _gqa.TOLERANCE_NOTE
AXES = {
    "batch_size": "var",
    "num_qo_heads": 5,
    "num_kv_heads": 1,
    "head_dim": 128,
    "num_pages": "var",
    "page_size": 1,
    "len_indptr": "var",
    "num_kv_indices": "var",
}
INPUTS = {
    "q": (("batch_size", "num_qo_heads", "head_dim"), "bfloat16"),
    "k_cache": (("num_pages", "page_size", "num_kv_heads", "head_dim"), "bfloat16"),
    "v_cache": (("num_pages", "page_size", "num_kv_heads", "head_dim"), "bfloat16"),
    "kv_indptr": (("len_indptr",), "int32"),
    "kv_indices": (("num_kv_indices",), "int32"),
    "sm_scale": (None, "float32"),
}
OUTPUTS = {
    "output": (("batch_size", "num_qo_heads", "head_dim"), "bfloat16"),
    "lse": (("batch_size", "num_qo_heads"), "float32"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "num_qo_heads": 5,
    "num_kv_heads": 1,
    "head_dim": 128,
    "page_size": 1,
    "batch_size": 128,
    "len_indptr": 129,
    "num_kv_indices": 262144,
    "num_pages": 294912,
}
SMOKE = {
    "num_qo_heads": 5,
    "num_kv_heads": 1,
    "head_dim": 128,
    "page_size": 1,
    "batch_size": 4,
    "len_indptr": 5,
    "num_kv_indices": 150,
    "num_pages": 158,
}


def make_inputs(
    workload: dict[str, int], *, seed: int, device: str = "cpu"
) -> tuple[torch.Tensor | float, ...]:
    return _gqa.make_decode_inputs(workload, seed=seed, device=device, with_last_page_len=False)


def reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    return _gqa.paged_decode(q, k_cache, v_cache, kv_indptr, kv_indices, None, sm_scale)


def cost(workload: dict[str, int]) -> Cost:
    return _gqa.decode_cost(workload, with_last_page_len=False)


def input_cost(workload: dict[str, int], inputs: tuple[object, ...]) -> Cost:
    return _gqa.decode_cost(workload, with_last_page_len=False, inputs=inputs)
