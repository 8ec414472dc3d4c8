"""DeepSeek-V3.2 sparse (DSA) MLA attention: 16 heads over 2048 selected latent-cache tokens, page size 64."""

# Source: FlashInfer-Trace definition `dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64`
#   (flashinfer-ai/flashinfer-bench, flashinfer_trace/definitions/dsa_paged/
#   dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64.json); outputs `output` and base-2 `lse`.
# Upstream: flashinfer.decode.trtllm_batch_decode_with_kv_cache_mla with sparse top-k indices
#   (DeepSeek Sparse Attention of DeepSeek-V3.2, tensor parallel 8: 16 heads); sm_scale =
#   1/sqrt(128 + 64). The indices come from the lightning indexer (p18): valid entries first, -1 after.
# Production shape: decode step of 128 sequences (one query token each) whose contexts average
#   4096 tokens in an 8320-page pool of 64-token pages; sequences shorter than 2048 tokens select
#   all their tokens and pad with -1.

from __future__ import annotations

import math

import torch

from problems._common import Cost, generator, nbytes, paged_layout, rand, randn, seq_lens, upcast
from problems.attention import _mla

ID = "p17"
NAME = "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64_bf16"
FAMILY = "attention"
SOURCE = "FI"
DESCRIPTION = """\
DeepSeek-V3.2 sparse attention (DSA) in absorbed Multi-head Latent Attention form: each query token
attends only to the cache tokens its top-k list selects. Inputs: `q_nope` [num_tokens, 16, 512] bf16
and `q_pe` [num_tokens, 16, 64] bf16 (16 query heads), `ckv_cache` [num_pages, 64, 512] bf16 (the
compressed latent KV) and `kpe_cache` [num_pages, 64, 64] bf16 (the rotary key part), paged with 64
tokens per page, `sparse_indices` [num_tokens, 2048] int32, and `sm_scale` (a Python float,
1/sqrt(192)). Entry n of row t is a flat cache slot page * 64 + offset (ckv_cache.reshape(-1, 512)
row), or -1 for padding; valid entries come first, in no particular order, and are distinct; a row
has min(2048, context length) valid entries. Every head reads the same latent row per selected token.
For token t, head h and each valid slot j: s_j = sm_scale * (dot(q_nope[t,h], ckv_j) + dot(q_pe[t,h],
kpe_j)). Outputs: `output` [num_tokens, 16, 512] bf16 = sum_j softmax_j(s) * ckv_j (the value is the
latent itself) and `lse` [num_tokens, 16] float32 = log2(sum_j exp(s_j)), the base-2 log-sum-exp over
the valid slots. Compute in float32; round only the output to bf16. Every row has at least one valid
entry."""
NOTES = ""
TOLERANCE_NOTE = (
    "Default allowance. `lse` (float32) is checked against the float64 anchor like `output`: keep the "
    "logits, running max and sums in fp32 (bf16 products accumulated in fp32)."
)
AXES = {
    "num_tokens": "var",
    "num_qo_heads": 16,
    "head_dim_ckv": 512,
    "head_dim_kpe": 64,
    "page_size": 64,
    "topk": 2048,
    "num_pages": "var",
}
INPUTS = {
    "q_nope": (("num_tokens", "num_qo_heads", "head_dim_ckv"), "bfloat16"),
    "q_pe": (("num_tokens", "num_qo_heads", "head_dim_kpe"), "bfloat16"),
    "ckv_cache": (("num_pages", "page_size", "head_dim_ckv"), "bfloat16"),
    "kpe_cache": (("num_pages", "page_size", "head_dim_kpe"), "bfloat16"),
    "sparse_indices": (("num_tokens", "topk"), "int32"),
    "sm_scale": (None, "float32"),
}
OUTPUTS = {
    "output": (("num_tokens", "num_qo_heads", "head_dim_ckv"), "bfloat16"),
    "lse": (("num_tokens", "num_qo_heads"), "float32"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "num_tokens": 128,
    "num_qo_heads": 16,
    "head_dim_ckv": 512,
    "head_dim_kpe": 64,
    "page_size": 64,
    "topk": 2048,
    "num_pages": 8320,
}
SMOKE = {
    "num_tokens": 3,
    "num_qo_heads": 16,
    "head_dim_ckv": 512,
    "head_dim_kpe": 64,
    "page_size": 64,
    "topk": 2048,
    "num_pages": 147,
}

SM_SCALE = 1.0 / math.sqrt(128 + 64)
#: query tokens per block in the reference: bounds the gathered [tokens, topk, 576] rows
CHUNK_T = 32


def make_inputs(
    workload: dict[str, int], *, seed: int, device: str = "cpu"
) -> tuple[torch.Tensor | float, ...]:
    gen = generator(seed, device)
    t, h, dc, dp = (workload[a] for a in ("num_tokens", "num_qo_heads", "head_dim_ckv", "head_dim_kpe"))
    ps, topk, num_pages = workload["page_size"], workload["topk"], workload["num_pages"]
    # one sequence per query token; leave room for each sequence's partly filled last page
    lens = seq_lens(t, (num_pages - t) * ps, gen)
    layout = paged_layout(lens, ps, gen, device, spare_pages=num_pages - sum(-(-n // ps) for n in lens))
    q_nope = randn((t, h, dc), _mla.BF16, gen, device)
    q_pe = randn((t, h, dp), _mla.BF16, gen, device)
    ckv_cache = randn((num_pages, ps, dc), _mla.BF16, gen, device)
    kpe_cache = randn((num_pages, ps, dp), _mla.BF16, gen, device)
    # each token selects min(topk, len) distinct positions of its own sequence, in random order:
    # sort random keys, with the positions past the sequence end keyed last
    len_t = torch.tensor(lens, device=device)
    max_len = max(lens)
    pos = torch.arange(max_len, device=device)
    keys = rand((t, max_len), torch.float32, gen, device)
    keys.masked_fill_(pos[None, :] >= len_t[:, None], 2.0)
    n_sel = min(topk, max_len)
    chosen = torch.argsort(keys, dim=1)[:, :n_sel]
    valid = chosen < len_t[:, None]
    chosen = torch.where(valid, chosen, 0)  # keep the page look-up inside the sequence's pages
    page_of = layout.kv_indices.long()[layout.kv_indptr.long()[:-1, None] + chosen // ps]
    slots = torch.where(valid, page_of * ps + chosen % ps, -1)
    sparse_indices = torch.full((t, topk), -1, dtype=torch.int32, device=device)
    sparse_indices[:, :n_sel] = slots.to(torch.int32)
    return q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, SM_SCALE


def reference(
    q_nope: torch.Tensor,
    q_pe: torch.Tensor,
    ckv_cache: torch.Tensor,
    kpe_cache: torch.Tensor,
    sparse_indices: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    t, h, dc = q_nope.shape
    dp = q_pe.shape[-1]
    ckv = ckv_cache.reshape(-1, dc)  # flat slots: page * page_size + offset
    kpe = kpe_cache.reshape(-1, dp)
    out = torch.empty_like(q_nope)
    lse = torch.empty((t, h), dtype=_mla.lse_dtype(q_nope), device=q_nope.device)
    for s in range(0, t, CHUNK_T):
        e = min(s + CHUNK_T, t)
        idx = sparse_indices[s:e].long()
        valid = idx >= 0
        rows = idx.clamp_min(0)  # padding reads slot 0 and is masked below
        kc, kp = upcast(ckv[rows]), upcast(kpe[rows])  # [T, K, Dc], [T, K, Dp]
        logits = (
            torch.einsum("thd,tkd->thk", upcast(q_nope[s:e]), kc)
            + torch.einsum("thd,tkd->thk", upcast(q_pe[s:e]), kp)
        ) * sm_scale
        logits.masked_fill_(~valid[:, None, :], float("-inf"))
        lse[s:e] = torch.logsumexp(logits, dim=-1) * _mla.LOG2E
        out[s:e] = torch.einsum("thk,tkd->thd", torch.softmax(logits, dim=-1), kc).to(q_nope.dtype)
    return out, lse


def cost(workload: dict[str, int]) -> Cost:
    t, h, dc, dp = (workload[a] for a in ("num_tokens", "num_qo_heads", "head_dim_ckv", "head_dim_kpe"))
    ps, topk, num_pages = workload["page_size"], workload["topk"], workload["num_pages"]
    # nominal: each token selects min(topk, mean context) distinct slots (short contexts select fewer)
    sel = t * min(topk, (num_pages - t) * ps / t)
    moved = (
        nbytes((t, h, dc + dp), torch.bfloat16)
        + round(sel) * (dc + dp) * 2  # the selected cache rows
        + nbytes((t, topk), torch.int32)
        + nbytes((t, h, dc), torch.bfloat16)
        + nbytes((t, h), torch.float32)
    )
    return Cost(bytes=moved, flops={"bf16": 2.0 * h * (dc + dp + dc) * sel, "fp32": 5.0 * h * sel})
