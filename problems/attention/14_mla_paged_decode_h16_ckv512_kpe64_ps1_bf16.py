"""Batched absorbed-MLA decode (DeepSeek-V3 TP8: 16 heads, 512 latent + 64 rope) over a page-size-1 cache."""

# Source: FlashInfer-Trace definition `mla_paged_decode_h16_ckv512_kpe64_ps1`
#   (flashinfer-ai/flashinfer-bench, flashinfer_trace/definitions/mla_paged/
#   mla_paged_decode_h16_ckv512_kpe64_ps1.json); outputs `output` and the base-2 `lse`, as there.
# Upstream: flashinfer.mla.BatchMLAPagedAttentionWrapper (decode, page_size 1), DeepSeek-V3/R1 with
#   tensor parallel 8 (128 / 8 = 16 heads per GPU); sm_scale = 1/sqrt(128 + 64), the pre-absorption
#   head dim.
# Production shape: decode step of 64 sequences with 4096 cached tokens on average (262144
#   one-token pages) in a 270336-page pool.

from __future__ import annotations

import math

import torch

from problems._common import Cost, generator, nbytes, paged_layout, randn, seq_lens, upcast
from problems.attention import _mla

ID = "p14"
NAME = "mla_paged_decode_h16_ckv512_kpe64_ps1_bf16"
FAMILY = "attention"
SOURCE = "FI"
DESCRIPTION = """\
Batched Multi-head Latent Attention (DeepSeek-V3, absorbed form) decode over a paged cache with page
size 1. Inputs: `q_nope` [batch_size, 16, 512] bf16 and `q_pe` [batch_size, 16, 64] bf16 (one new
token per sequence, 16 query heads), `ckv_cache` [num_pages, 1, 512] bf16 (the compressed latent KV)
and `kpe_cache` [num_pages, 1, 64] bf16 (the rotary key part), `kv_indptr` [batch_size + 1] int32
and `kv_indices` [num_kv_indices] int32 (a CSR page table), and `sm_scale` (a Python float,
1/sqrt(192)). Page size 1: sequence b's KV tokens are the pages kv_indices[kv_indptr[b] + j] for
j = 0 .. kv_indptr[b+1]-kv_indptr[b]-1, in order; pages are scattered through the pool (neither
contiguous nor sorted) and the pool holds unused pages. Every head reads the same single latent row
per token (one shared KV "head"). For sequence b, head h and KV token j: s_j = sm_scale *
(dot(q_nope[b,h], ckv_j) + dot(q_pe[b,h], kpe_j)) (no mask). Outputs: `output` [batch_size, 16, 512]
bf16 = sum_j softmax_j(s) * ckv_j (the value is the latent itself), and `lse` [batch_size, 16]
float32 = log2(sum_j exp(s_j)), the base-2 log-sum-exp of the scaled logits. Compute in float32;
round only the output to bf16. Every sequence has at least one KV token."""
NOTES = ""
TOLERANCE_NOTE = (
    "Default allowance. `lse` (float32) is checked against the float64 anchor like `output`: keep the "
    "logits, running max and sums in fp32 (bf16 products accumulated in fp32)."
)
AXES = {
    "batch_size": "var",
    "num_qo_heads": 16,
    "head_dim_ckv": 512,
    "head_dim_kpe": 64,
    "page_size": 1,
    "num_pages": "var",
    "len_indptr": "var",
    "num_kv_indices": "var",
}
INPUTS = {
    "q_nope": (("batch_size", "num_qo_heads", "head_dim_ckv"), "bfloat16"),
    "q_pe": (("batch_size", "num_qo_heads", "head_dim_kpe"), "bfloat16"),
    "ckv_cache": (("num_pages", "page_size", "head_dim_ckv"), "bfloat16"),
    "kpe_cache": (("num_pages", "page_size", "head_dim_kpe"), "bfloat16"),
    "kv_indptr": (("len_indptr",), "int32"),
    "kv_indices": (("num_kv_indices",), "int32"),
    "sm_scale": (None, "float32"),
}
OUTPUTS = {
    "output": (("batch_size", "num_qo_heads", "head_dim_ckv"), "bfloat16"),
    "lse": (("batch_size", "num_qo_heads"), "float32"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "batch_size": 64,
    "num_qo_heads": 16,
    "head_dim_ckv": 512,
    "head_dim_kpe": 64,
    "page_size": 1,
    "num_pages": 270336,
    "len_indptr": 65,
    "num_kv_indices": 262144,
}
SMOKE = {
    "batch_size": 4,
    "num_qo_heads": 16,
    "head_dim_ckv": 512,
    "head_dim_kpe": 64,
    "page_size": 1,
    "num_pages": 320,
    "len_indptr": 5,
    "num_kv_indices": 300,
}

SM_SCALE = 1.0 / math.sqrt(128 + 64)


def make_inputs(
    workload: dict[str, int], *, seed: int, device: str = "cpu"
) -> tuple[torch.Tensor | float, ...]:
    gen = generator(seed, device)
    batch, h, dc, dp = (workload[a] for a in ("batch_size", "num_qo_heads", "head_dim_ckv", "head_dim_kpe"))
    num_pages, n_idx = workload["num_pages"], workload["num_kv_indices"]
    if workload["len_indptr"] != batch + 1:
        raise ValueError("len_indptr must be batch_size + 1")
    layout = paged_layout(seq_lens(batch, n_idx, gen), 1, gen, device, spare_pages=num_pages - n_idx)
    q_nope = randn((batch, h, dc), _mla.BF16, gen, device)
    q_pe = randn((batch, h, dp), _mla.BF16, gen, device)
    ckv_cache = randn((num_pages, 1, dc), _mla.BF16, gen, device)
    kpe_cache = randn((num_pages, 1, dp), _mla.BF16, gen, device)
    return q_nope, q_pe, ckv_cache, kpe_cache, layout.kv_indptr, layout.kv_indices, SM_SCALE


def reference(
    q_nope: torch.Tensor,
    q_pe: torch.Tensor,
    ckv_cache: torch.Tensor,
    kpe_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    batch, h, _ = q_nope.shape
    ckv = ckv_cache.squeeze(1)  # page size 1: a page is a token
    kpe = kpe_cache.squeeze(1)
    indptr = kv_indptr.tolist()
    out = torch.zeros_like(q_nope)
    lse = torch.full((batch, h), float("-inf"), dtype=_mla.lse_dtype(q_nope), device=q_nope.device)
    for b in range(batch):
        if indptr[b] >= indptr[b + 1]:
            continue
        tok = kv_indices[indptr[b] : indptr[b + 1]].long()
        o, lse_b = _mla.mla_attend(
            upcast(q_nope[b : b + 1]), upcast(q_pe[b : b + 1]), upcast(ckv[tok]), upcast(kpe[tok]), sm_scale
        )
        out[b] = o[0].to(q_nope.dtype)
        lse[b] = lse_b[0]
    return out, lse


def cost(workload: dict[str, int]) -> Cost:
    batch, h, dc, dp = (workload[a] for a in ("batch_size", "num_qo_heads", "head_dim_ckv", "head_dim_kpe"))
    n_idx = workload["num_kv_indices"]
    moved = (
        nbytes((batch, h, dc + dp), torch.bfloat16)  # q_nope + q_pe
        + nbytes((n_idx, dc + dp), torch.bfloat16)  # the touched cache rows
        + 4 * (batch + 1 + n_idx)  # indptr + indices
        + nbytes((batch, h, dc), torch.bfloat16)
        + nbytes((batch, h), torch.float32)
    )
    pairs = float(n_idx)  # every head of a sequence sees every one of its tokens
    # QK over 576 dims and PV over 512 dims; softmax ~5 fp32 ops per (pair, head)
    return Cost(bytes=moved, flops={"bf16": 2.0 * h * (dc + dp + dc) * pairs, "fp32": 5.0 * h * pairs})
