"""Causal ragged MLA prefill (DeepSeek-V3 TP8: 16 heads, qk dim 192 = 128 nope + 64 rope, v dim 128), bf16."""

# Source: FlashInfer-Trace definition `mla_ragged_prefill_causal_h16_qk192_vo128`
#   (flashinfer-ai/flashinfer-bench, flashinfer_trace/definitions/mla_ragged/
#   mla_ragged_prefill_causal_h16_qk192_vo128.json); outputs `output` and the base-2 `lse`.
# Upstream: flashinfer.prefill.BatchPrefillWithRaggedKVCacheWrapper (causal=True) as SGLang runs
#   DeepSeek-V3/R1 prefill without prefix cache (K/V decompressed per head: 16 kv heads = 16 q heads,
#   tensor parallel 8); sm_scale = 1/sqrt(192).
# Production shape: a 16384-token prefill batch of 8 ragged sequences (no cached prefix: Lk == Lq).

from __future__ import annotations

import math

import torch

from problems._common import (
    Cost,
    causal_pairs,
    cu_seqlens,
    generator,
    lengths,
    mean_causal_pairs,
    nbytes,
    randn,
    seq_lens,
    upcast,
)
from problems.attention import _mla

ID = "p16"
NAME = "mla_ragged_prefill_causal_h16_qk192_vo128_bf16"
FAMILY = "attention"
SOURCE = "FI"
DESCRIPTION = """\
Batched causal attention prefill over ragged (variable-length, concatenated) Q/K/V in DeepSeek-V3's
non-absorbed MLA prefill form: query/key head dim 192 (128 "nope" + 64 rotary, concatenated), value
head dim 128, 16 query heads and 16 KV heads (head h reads KV head h). Inputs: `q` [total_q, 16, 192]
bf16, `k` [total_kv, 16, 192] bf16, `v` [total_kv, 16, 128] bf16, `qo_indptr` [batch_size + 1] int32
and `kv_indptr` [batch_size + 1] int32 (sequence b's queries are rows qo_indptr[b]:qo_indptr[b+1] of
q, its keys/values rows kv_indptr[b]:kv_indptr[b+1] of k/v), and `sm_scale` (a Python float,
1/sqrt(192)). Causal mask aligned at the END of the KV: a sequence with Lq queries and Lk >= Lq keys
lets its query i (0-based) see keys j <= i + (Lk - Lq); in this workload every sequence is a fresh
prefill (Lk == Lq, plain causal). s_j = sm_scale * dot(q[i,h], k[j,h]) over those j. Outputs: `output`
[total_q, 16, 128] bf16 = sum_j softmax_j(s) v[j,h], and `lse` [total_q, 16] float32 =
log2(sum_j exp(s_j)), the base-2 log-sum-exp of the scaled logits. Compute in float32; round only the
output to bf16. Sequence lengths vary."""
NOTES = ""
TOLERANCE_NOTE = (
    "Default allowance. `lse` (float32) is checked against the float64 anchor like `output`: keep the "
    "logits, running max and sums in fp32 (bf16 products accumulated in fp32)."
)
AXES = {
    "num_qo_heads": 16,
    "num_kv_heads": 16,
    "qk_dim": 192,
    "vo_dim": 128,
    "total_q": "var",
    "total_kv": "var",
    "len_indptr": "var",
}
INPUTS = {
    "q": (("total_q", "num_qo_heads", "qk_dim"), "bfloat16"),
    "k": (("total_kv", "num_kv_heads", "qk_dim"), "bfloat16"),
    "v": (("total_kv", "num_kv_heads", "vo_dim"), "bfloat16"),
    "qo_indptr": (("len_indptr",), "int32"),
    "kv_indptr": (("len_indptr",), "int32"),
    "sm_scale": (None, "float32"),
}
OUTPUTS = {
    "output": (("total_q", "num_qo_heads", "vo_dim"), "bfloat16"),
    "lse": (("total_q", "num_qo_heads"), "float32"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "num_qo_heads": 16,
    "num_kv_heads": 16,
    "qk_dim": 192,
    "vo_dim": 128,
    "total_q": 16384,
    "total_kv": 16384,
    "len_indptr": 9,
}
SMOKE = {
    "num_qo_heads": 16,
    "num_kv_heads": 16,
    "qk_dim": 192,
    "vo_dim": 128,
    "total_q": 96,
    "total_kv": 96,
    "len_indptr": 4,
}


def make_inputs(
    workload: dict[str, int], *, seed: int, device: str = "cpu"
) -> tuple[torch.Tensor | float, ...]:
    gen = generator(seed, device)
    hq, hkv, dqk, dv = (workload[a] for a in ("num_qo_heads", "num_kv_heads", "qk_dim", "vo_dim"))
    total_q, total_kv, batch = workload["total_q"], workload["total_kv"], workload["len_indptr"] - 1
    if total_q != total_kv:
        raise ValueError("this workload is a fresh prefill: total_q must equal total_kv")
    lens = seq_lens(batch, total_q, gen)
    q = randn((total_q, hq, dqk), _mla.BF16, gen, device)
    k = randn((total_kv, hkv, dqk), _mla.BF16, gen, device)
    v = randn((total_kv, hkv, dv), _mla.BF16, gen, device)
    indptr = cu_seqlens(lens, device)
    return q, k, v, indptr, indptr.clone(), 1.0 / math.sqrt(dqk)


def _attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """One sequence (upcast): q [Lq, H, Dqk], k [Lk, H, Dqk], v [Lk, H, Dv], bottom-right causal."""
    lq, h, _ = q.shape
    lk = k.shape[0]
    delta = lk - lq
    out = q.new_empty((lq, h, v.shape[-1]))
    lse = q.new_empty((lq, h))
    for s in range(0, lq, _mla.CHUNK_Q):
        e = min(s + _mla.CHUNK_Q, lq)
        kv_end = min(lk, e + delta)
        logits = torch.einsum("qhd,khd->hqk", q[s:e], k[:kv_end]) * sm_scale
        q_pos = torch.arange(s, e, device=q.device) + delta
        k_pos = torch.arange(kv_end, device=q.device)
        logits.masked_fill_(k_pos[None, :] > q_pos[:, None], float("-inf"))
        lse[s:e] = (torch.logsumexp(logits, dim=-1) * _mla.LOG2E).transpose(0, 1)
        out[s:e] = torch.einsum("hqk,khd->qhd", torch.softmax(logits, dim=-1), v[:kv_end])
    return out, lse


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    total_q, h, _ = q.shape
    qo, kvp = qo_indptr.tolist(), kv_indptr.tolist()
    out = torch.zeros((total_q, h, v.shape[-1]), dtype=q.dtype, device=q.device)
    lse = torch.full((total_q, h), float("-inf"), dtype=_mla.lse_dtype(q), device=q.device)
    for b in range(len(qo) - 1):
        qs, qe, ks, ke = qo[b], qo[b + 1], kvp[b], kvp[b + 1]
        if qs >= qe or ks >= ke:
            continue
        o, lse_b = _attend(upcast(q[qs:qe]), upcast(k[ks:ke]), upcast(v[ks:ke]), sm_scale)
        out[qs:qe] = o.to(q.dtype)
        lse[qs:qe] = lse_b
    return out, lse


def cost(workload: dict[str, int]) -> Cost:
    """Nominal: equal lengths (the fewest causal pairs for this total)."""
    batch = workload["len_indptr"] - 1
    return _cost(workload, mean_causal_pairs(batch, workload["total_q"], workload["total_kv"]))


def input_cost(workload: dict[str, int], inputs: tuple[object, ...]) -> Cost:
    qo_indptr, kv_indptr = inputs[3], inputs[4]
    assert isinstance(qo_indptr, torch.Tensor) and isinstance(kv_indptr, torch.Tensor)
    return _cost(workload, causal_pairs(lengths(qo_indptr), lengths(kv_indptr)))


def _cost(workload: dict[str, int], pairs: float) -> Cost:
    hq, hkv, dqk, dv = (workload[a] for a in ("num_qo_heads", "num_kv_heads", "qk_dim", "vo_dim"))
    total_q, total_kv, batch = workload["total_q"], workload["total_kv"], workload["len_indptr"] - 1
    moved = (
        nbytes((total_q, hq, dqk), torch.bfloat16)
        + nbytes((total_kv, hkv, dqk + dv), torch.bfloat16)
        + 4 * 2 * (batch + 1)
        + nbytes((total_q, hq, dv), torch.bfloat16)
        + nbytes((total_q, hq), torch.float32)
    )
    return Cost(bytes=moved, flops={"bf16": 2.0 * hq * (dqk + dv) * pairs, "fp32": 5.0 * hq * pairs})
