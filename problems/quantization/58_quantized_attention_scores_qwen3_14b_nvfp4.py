"""Decode attention scores (Q.K^T / sqrt(d)) of Qwen3-14B from an NVFP4 query and an NVFP4 key cache."""

# Source: SOL-ExecBench (written here from the operator's semantics; the dataset is not redistributed).
# Upstream: FP4 attention as in NVFP4 KV caches (TensorRT-LLM / vLLM on Blackwell) and SageAttention3:
#   keys stored as NVFP4 along head_dim (e2m1 + fp8 scale per 16 + fp32 global), the query quantised
#   to NVFP4 the same way, Q.K^T on FP4 tensor cores. "Scores" are the scaled logits before softmax
#   (softmax probabilities would be compared against a max-relative allowance that hides errors in
#   the many tiny probabilities of long sequences).
# Production shape: Qwen3-14B (40 query heads, 8 KV heads, head_dim 128); a decode batch of 32
#   sequences holding 262144 cached keys in all (8192 on average), ragged (CSR indptr) layout.

from __future__ import annotations

import math

import torch

from problems._common import Cost, cu_seqlens, generator, nbytes, randn, seq_lens
from problems.quantization import _nvfp4
from problems.quantization._util import math_dtype

ID = "p58"
NAME = "quantized_attention_scores_qwen3_14b_nvfp4"
FAMILY = "quantization"
SOURCE = "SOL"
DESCRIPTION = f"""\
Attention scores of one decode step of Qwen3-14B with an NVFP4 key cache and an NVFP4-quantised query
(FP4 x FP4 Q.K^T).
{_nvfp4.FORMAT_TEXT}
{_nvfp4.ACT_QUANT_TEXT}
Inputs: `query` [batch, 40, 128] bf16 (one new token per sequence, already normed and rotated);
`q_scale` float32 scalar (static global scale for quantising the query: every query head row of 128
is NVFP4-quantised in 8 blocks of 16 with the formula above); `k_cache` uint8
[total_kv, 8, 64] and `k_cache_scale` float8_e4m3fn [total_kv, 8, 8] (NVFP4 keys: per token and KV
head, 128 e2m1 values packed along head_dim, one fp8 scale per 16), `k_global` float32 scalar;
`kv_indptr` [batch+1] int32: the keys of sequence b are rows kv_indptr[b] .. kv_indptr[b+1]-1
(every sequence has at least one key).
For sequence b, query head h (KV head g = h // 5, grouped-query attention) and key row j of b:
scores[j, h] = (sum_d Qdq[b, h, d] * Kdq[j, g, d]) / sqrt(128), accumulated in float32, with Qdq and
Kdq the dequantised NVFP4 values (no softmax).
Output `scores` [total_kv, 40] bf16 (row j holds the scores of key j against the 40 query heads of
its sequence).
Production constants: 40 query heads, 8 KV heads, head_dim 128."""
NOTES = (
    _nvfp4.HOPPER_NOTE
    + """
Decode is memory-bound: the packed keys (64 B + 8 B of scales per key and head) dominate the traffic,
so unpack in registers and use the 5 query heads sharing a KV head as the MMA's M dimension (or use
CUDA-core dot products); the ragged indptr decides which query row each key row meets."""
)
AXES = {
    "batch": "var",
    "batch_plus_one": "var",  # batch + 1
    "total_kv": "var",
    "num_qo_heads": 40,
    "num_kv_heads": 8,
    "head_dim": 128,
    "head_dim_half": 64,
    "head_dim_blocks": 8,
}
INPUTS = {
    "query": (("batch", "num_qo_heads", "head_dim"), "bfloat16"),
    "q_scale": ((), "float32"),
    "k_cache": (("total_kv", "num_kv_heads", "head_dim_half"), "uint8"),
    "k_cache_scale": (("total_kv", "num_kv_heads", "head_dim_blocks"), "float8_e4m3fn"),
    "k_global": ((), "float32"),
    "kv_indptr": (("batch_plus_one",), "int32"),
}
OUTPUTS = {"scores": (("total_kv", "num_qo_heads"), "bfloat16")}
INPLACE: tuple[str, ...] = ()
_CONST = {"num_qo_heads": 40, "num_kv_heads": 8, "head_dim": 128, "head_dim_half": 64, "head_dim_blocks": 8}
WORKLOAD = {"batch": 32, "batch_plus_one": 33, "total_kv": 262144, **_CONST}
SMOKE = {"batch": 3, "batch_plus_one": 4, "total_kv": 41, **_CONST}
TOLERANCE_NOTE = """\
The bf16 query is quantised with a static global scale whose odd 11-bit mantissa keeps every
quotient away from rounding midpoints, so its NVFP4 codes are identical in float32, float64 and any
correct kernel; the scores then differ only by float32 summation order, far inside the bf16 allowance."""

Q_AMAX = 8.0  # calibrated query amax behind the static q_scale


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    b, total = workload["batch"], workload["total_kv"]
    hq, hk, d = workload["num_qo_heads"], workload["num_kv_heads"], workload["head_dim"]
    query = randn((b, hq, d), torch.bfloat16, gen, device, scale=1.5)
    q_scale = torch.tensor(_nvfp4.static_global_scale(Q_AMAX), dtype=torch.float32, device=device)
    keys = randn((total, hk, d), torch.float32, gen, device)
    k_global = _nvfp4.global_scale_for(keys.abs().amax()).to(torch.float32)
    k_cache, k_cache_scale = _nvfp4.quantize(keys, k_global)
    kv_indptr = cu_seqlens(seq_lens(b, total, gen, minimum=max(1, total // (4 * b))), device)
    return query, q_scale, k_cache, k_cache_scale, k_global, kv_indptr


def reference(
    query: torch.Tensor,
    q_scale: torch.Tensor,
    k_cache: torch.Tensor,
    k_cache_scale: torch.Tensor,
    k_global: torch.Tensor,
    kv_indptr: torch.Tensor,
) -> torch.Tensor:
    b, hq, d = query.shape
    hk = k_cache.shape[1]
    dt = math_dtype(query, q_scale, k_global)
    q = _nvfp4.dequantize(*_nvfp4.quantize(query, q_scale), q_scale, dt).reshape(b, hk, hq // hk, d)
    keys = _nvfp4.dequantize(k_cache, k_cache_scale, k_global, dt)  # [total_kv, hk, d]
    scores = torch.empty(keys.shape[0], hq, dtype=dt, device=query.device)
    bounds = kv_indptr.tolist()
    for i in range(b):  # one decode query per sequence meets that sequence's keys
        lo, hi = bounds[i], bounds[i + 1]
        scores[lo:hi] = torch.einsum("gjd,lgd->lgj", q[i], keys[lo:hi]).reshape(hi - lo, hq)
    return (scores / math.sqrt(d)).to(query.dtype)


def cost(workload: dict[str, int]) -> Cost:
    b, total = workload["batch"], workload["total_kv"]
    hq, hk, d = workload["num_qo_heads"], workload["num_kv_heads"], workload["head_dim"]
    moved = (
        nbytes((b, hq, d), torch.bfloat16)
        + nbytes((total, hk, d // 2), torch.uint8)
        + nbytes((total, hk, d // 16), torch.float8_e4m3fn)
        + 2 * 4
        + nbytes((b + 1,), torch.int32)
        + nbytes((total, hq), torch.bfloat16)
    )
    # FP4 x FP4 scores; query quantisation and the 1/sqrt(d) scaling in fp32
    return Cost(bytes=moved, flops={"fp4": 2.0 * total * hq * d, "fp32": 5.0 * b * hq * d + total * hq})
