"""Batched causal GQA prefill over ragged Q/K/V, 16 q / 2 kv heads, head dim 128, bf16."""

# Source: FlashInfer-Trace definition `gqa_ragged_prefill_causal_h16_kv2_d128`
#   (flashinfer-ai/flashinfer-bench, flashinfer_trace/definitions/gqa_ragged/
#   gqa_ragged_prefill_causal_h16_kv2_d128.json);
#   outputs `output` and the base-2 `lse`, as there.
# Upstream: flashinfer.prefill.BatchPrefillWithRaggedKVCacheWrapper (causal=True, return_lse=True).
# Production shape: Qwen3-32B (64 q heads, 8 kv heads, head_dim 128) at TP4 -> 16 q / 2 kv heads
#   per GPU; prefill batch of 8 sequences, 8192 query tokens against 10240 key tokens (some
#   sequences carry leading keys beyond their queries, exercising the end-aligned causal mask).

from __future__ import annotations

import torch

from problems._common import Cost
from problems.attention import _gqa

ID = "p08"
NAME = "gqa_ragged_prefill_causal_h16_kv2_d128_bf16"
FAMILY = "attention"
SOURCE = "FI"
DESCRIPTION = _gqa.ragged_prefill_description(16, 2, 128)
NOTES = ""
TOLERANCE_NOTE = _gqa.TOLERANCE_NOTE
AXES = {
    "num_qo_heads": 16,
    "num_kv_heads": 2,
    "head_dim": 128,
    "len_indptr": "var",
    "total_q": "var",
    "total_kv": "var",
}
INPUTS = {
    "q": (("total_q", "num_qo_heads", "head_dim"), "bfloat16"),
    "k": (("total_kv", "num_kv_heads", "head_dim"), "bfloat16"),
    "v": (("total_kv", "num_kv_heads", "head_dim"), "bfloat16"),
    "qo_indptr": (("len_indptr",), "int32"),
    "kv_indptr": (("len_indptr",), "int32"),
    "sm_scale": (None, "float32"),
}
OUTPUTS = {
    "output": (("total_q", "num_qo_heads", "head_dim"), "bfloat16"),
    "lse": (("total_q", "num_qo_heads"), "float32"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "num_qo_heads": 16,
    "num_kv_heads": 2,
    "head_dim": 128,
    "len_indptr": 9,
    "total_q": 8192,
    "total_kv": 10240,
}
SMOKE = {
    "num_qo_heads": 16,
    "num_kv_heads": 2,
    "head_dim": 128,
    "len_indptr": 4,
    "total_q": 40,
    "total_kv": 56,
}


def make_inputs(
    workload: dict[str, int], *, seed: int, device: str = "cpu"
) -> tuple[torch.Tensor | float, ...]:
    return _gqa.make_ragged_inputs(workload, seed=seed, device=device)


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    return _gqa.ragged_prefill(q, k, v, qo_indptr, kv_indptr, sm_scale)


def cost(workload: dict[str, int]) -> Cost:
    return _gqa.ragged_prefill_cost(workload)


def input_cost(workload: dict[str, int], inputs: tuple[object, ...]) -> Cost:
    return _gqa.ragged_prefill_cost(workload, inputs=inputs)
