"""Causal absorbed-MLA prefill (DeepSeek-V3 TP8: 16 heads, 512 latent + 64 rope) over a page-size-1 cache."""

# Source: FlashInfer-Trace definition `mla_paged_prefill_causal_h16_ckv512_kpe64_ps1`
#   (flashinfer-ai/flashinfer-bench, flashinfer_trace/definitions/mla_paged/
#   mla_paged_prefill_causal_h16_ckv512_kpe64_ps1.json); outputs `output` and the base-2 `lse`.
# Upstream: flashinfer.mla.BatchMLAPagedAttentionWrapper (causal=True), DeepSeek-V3/R1 incremental
#   (chunked / prefix-cached) prefill with tensor parallel 8; sm_scale = 1/sqrt(128 + 64).
# Production shape: 8 sequences, 4096 new tokens in total over 12288 cached-plus-new KV tokens
#   (one-token pages) in a 12544-page pool.

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
    paged_layout,
    randn,
    seq_lens,
    upcast,
)
from problems.attention import _mla

ID = "p15"
NAME = "mla_paged_prefill_causal_h16_ckv512_kpe64_ps1_bf16"
FAMILY = "attention"
SOURCE = "FI"
DESCRIPTION = """\
Batched causal Multi-head Latent Attention (DeepSeek-V3, absorbed form) prefill over a paged cache
with page size 1. Inputs: `q_nope` [total_q, 16, 512] bf16 and `q_pe` [total_q, 16, 64] bf16 (the new
tokens of all sequences, concatenated; 16 query heads), `ckv_cache` [num_pages, 1, 512] bf16 (the
compressed latent KV) and `kpe_cache` [num_pages, 1, 64] bf16 (the rotary key part), both already
holding the new tokens, `qo_indptr` [batch_size + 1] int32 (sequence b's queries are rows
qo_indptr[b]:qo_indptr[b+1]), `kv_indptr` [batch_size + 1] int32 and `kv_indices` [num_kv_indices]
int32 (a CSR page table), and `sm_scale` (a Python float, 1/sqrt(192)). Page size 1: sequence b's KV
tokens are the pages kv_indices[kv_indptr[b] + j], j = 0 .. Lk-1, in order; pages are scattered
through the pool and the pool holds unused pages. Every head reads the same latent row per token.
Causal mask aligned at the END of the KV: a sequence with Lq queries and Lk >= Lq KV tokens (Lk - Lq
of them a cached prefix) lets its query i (0-based) see KV tokens j <= i + (Lk - Lq). For those j:
s_j = sm_scale * (dot(q_nope[i,h], ckv_j) + dot(q_pe[i,h], kpe_j)). Outputs: `output` [total_q, 16,
512] bf16 = sum_j softmax_j(s) * ckv_j (the value is the latent itself) and `lse` [total_q, 16] float32
= log2(sum_j exp(s_j)), the base-2 log-sum-exp of the scaled logits. Compute in float32; round only
the output to bf16. Lengths vary; cached prefixes range from none (fresh prefill) to long."""
NOTES = ""
TOLERANCE_NOTE = (
    "Default allowance. `lse` (float32) is checked against the float64 anchor like `output`: keep the "
    "logits, running max and sums in fp32 (bf16 products accumulated in fp32)."
)
AXES = {
    "num_qo_heads": 16,
    "head_dim_ckv": 512,
    "head_dim_kpe": 64,
    "page_size": 1,
    "total_q": "var",
    "num_pages": "var",
    "len_indptr": "var",
    "num_kv_indices": "var",
}
INPUTS = {
    "q_nope": (("total_q", "num_qo_heads", "head_dim_ckv"), "bfloat16"),
    "q_pe": (("total_q", "num_qo_heads", "head_dim_kpe"), "bfloat16"),
    "ckv_cache": (("num_pages", "page_size", "head_dim_ckv"), "bfloat16"),
    "kpe_cache": (("num_pages", "page_size", "head_dim_kpe"), "bfloat16"),
    "qo_indptr": (("len_indptr",), "int32"),
    "kv_indptr": (("len_indptr",), "int32"),
    "kv_indices": (("num_kv_indices",), "int32"),
    "sm_scale": (None, "float32"),
}
OUTPUTS = {
    "output": (("total_q", "num_qo_heads", "head_dim_ckv"), "bfloat16"),
    "lse": (("total_q", "num_qo_heads"), "float32"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "num_qo_heads": 16,
    "head_dim_ckv": 512,
    "head_dim_kpe": 64,
    "page_size": 1,
    "total_q": 4096,
    "num_pages": 12544,
    "len_indptr": 9,
    "num_kv_indices": 12288,
}
SMOKE = {
    "num_qo_heads": 16,
    "head_dim_ckv": 512,
    "head_dim_kpe": 64,
    "page_size": 1,
    "total_q": 40,
    "num_pages": 112,
    "len_indptr": 4,
    "num_kv_indices": 100,
}

SM_SCALE = 1.0 / math.sqrt(128 + 64)


def make_inputs(
    workload: dict[str, int], *, seed: int, device: str = "cpu"
) -> tuple[torch.Tensor | float, ...]:
    gen = generator(seed, device)
    h, dc, dp = (workload[a] for a in ("num_qo_heads", "head_dim_ckv", "head_dim_kpe"))
    total_q, num_pages, n_idx = workload["total_q"], workload["num_pages"], workload["num_kv_indices"]
    batch = workload["len_indptr"] - 1
    q_lens = seq_lens(batch, total_q, gen)
    # cached prefixes: some sequences have none (fresh prefill), others a long one
    prefix = seq_lens(batch, n_idx - total_q, gen, minimum=0)
    kv_lens = [a + b for a, b in zip(q_lens, prefix, strict=True)]
    layout = paged_layout(kv_lens, 1, gen, device, spare_pages=num_pages - n_idx)
    q_nope = randn((total_q, h, dc), _mla.BF16, gen, device)
    q_pe = randn((total_q, h, dp), _mla.BF16, gen, device)
    ckv_cache = randn((num_pages, 1, dc), _mla.BF16, gen, device)
    kpe_cache = randn((num_pages, 1, dp), _mla.BF16, gen, device)
    qo_indptr = cu_seqlens(q_lens, device)
    return q_nope, q_pe, ckv_cache, kpe_cache, qo_indptr, layout.kv_indptr, layout.kv_indices, SM_SCALE


def reference(
    q_nope: torch.Tensor,
    q_pe: torch.Tensor,
    ckv_cache: torch.Tensor,
    kpe_cache: torch.Tensor,
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    total_q, h, _ = q_nope.shape
    ckv = ckv_cache.squeeze(1)  # page size 1: a page is a token
    kpe = kpe_cache.squeeze(1)
    qo, kvp = qo_indptr.tolist(), kv_indptr.tolist()
    out = torch.zeros_like(q_nope)
    lse = torch.full((total_q, h), float("-inf"), dtype=_mla.lse_dtype(q_nope), device=q_nope.device)
    for b in range(len(qo) - 1):
        qs, qe, ks, ke = qo[b], qo[b + 1], kvp[b], kvp[b + 1]
        if qs >= qe or ks >= ke:
            continue
        tok = kv_indices[ks:ke].long()
        o, lse_b = _mla.mla_attend(
            upcast(q_nope[qs:qe]), upcast(q_pe[qs:qe]), upcast(ckv[tok]), upcast(kpe[tok]), sm_scale,
            prefix=(ke - ks) - (qe - qs),
        )  # fmt: skip
        out[qs:qe] = o.to(q_nope.dtype)
        lse[qs:qe] = lse_b
    return out, lse


def cost(workload: dict[str, int]) -> Cost:
    total_q, n_idx, batch = workload["total_q"], workload["num_kv_indices"], workload["len_indptr"] - 1
    return _cost(workload, mean_causal_pairs(batch, total_q, n_idx))


def input_cost(workload: dict[str, int], inputs: tuple[object, ...]) -> Cost:
    """Page size 1: a sequence's pages are its tokens."""
    qo_indptr, kv_indptr = inputs[4], inputs[5]
    assert isinstance(qo_indptr, torch.Tensor) and isinstance(kv_indptr, torch.Tensor)
    return _cost(workload, causal_pairs(lengths(qo_indptr), lengths(kv_indptr)))


def _cost(workload: dict[str, int], pairs: float) -> Cost:
    h, dc, dp = (workload[a] for a in ("num_qo_heads", "head_dim_ckv", "head_dim_kpe"))
    total_q, n_idx, batch = workload["total_q"], workload["num_kv_indices"], workload["len_indptr"] - 1
    moved = (
        nbytes((total_q, h, dc + dp), torch.bfloat16)  # q_nope + q_pe
        + nbytes((n_idx, dc + dp), torch.bfloat16)  # the touched cache rows
        + 4 * (2 * (batch + 1) + n_idx)  # indptrs + indices
        + nbytes((total_q, h, dc), torch.bfloat16)
        + nbytes((total_q, h), torch.float32)
    )
    return Cost(bytes=moved, flops={"bf16": 2.0 * h * (dc + dp + dc) * pairs, "fp32": 5.0 * h * pairs})
