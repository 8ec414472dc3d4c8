"""Shared pieces of the GQA attention problems p01-p09 (FlashInfer-Trace `gqa_paged` / `gqa_ragged`).

Semantics (the FlashInfer-Trace definitions): query head ``h`` reads KV head ``h // (Hq // Hkv)``;
logits are ``sm_scale * q.k``; ``output`` is the softmax-weighted sum of values (bf16) and ``lse`` is
the base-2 log-sum-exp of the scaled logits (float32). Causal prefill aligns the queries with the
END of the sequence's KV: with ``Lq`` queries and ``Lk >= Lq`` keys, query ``i`` sees keys
``j <= i + (Lk - Lq)``. A paged cache is a CSR page table (``kv_indptr`` / ``kv_indices``) over a pool
``[num_pages, page_size, Hkv, D]``; every page of a sequence is full except the last, which holds
``kv_last_page_len`` tokens (always one token when ``page_size == 1``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from problems._common import (
    Cost,
    PagedLayout,
    causal_pairs,
    cu_seqlens,
    generator,
    lengths,
    mean_causal_pairs,
    nbytes,
    paged_layout,
    paged_lengths,
    randint,
    randn,
    seq_lens,
    tensor_core_sums,
    upcast,
)

LOG2E = 1.0 / math.log(2.0)
#: query rows per block in the prefill references: bounds the [Hq, rows, Lk] logits of the float64 anchor
CHUNK_Q = 1024
BF16 = torch.bfloat16


# ----------------------------------------------------------------------------------------------
# reference math
# ----------------------------------------------------------------------------------------------


def attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float, *, causal: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """One sequence: q [Lq, Hq, D], k/v [Lk, Hkv, D] (already upcast) -> out [Lq, Hq, D], lse2 [Lq, Hq].

    Causal means bottom-right aligned: query i sits at KV position i + (Lk - Lq).
    """
    lq, hq, d = q.shape
    lk, hkv, _ = k.shape
    group = hq // hkv
    # [Lq, Hkv, G, D]: consecutive query heads share one KV head, no repeat of K/V needed
    qg = q.reshape(lq, hkv, group, d)
    out = q.new_empty((lq, hq, d))
    lse = q.new_empty((lq, hq))
    delta = lk - lq
    for s in range(0, lq, CHUNK_Q):
        e = min(s + CHUNK_Q, lq)
        # keys past the last query of this block are masked for every row of it
        kv_end = min(lk, e + delta) if causal else lk
        kb, vb = k[:kv_end], v[:kv_end]
        with tensor_core_sums():  # (q and k are bf16 values)
            logits = torch.einsum("qhgd,khd->hgqk", qg[s:e], kb) * sm_scale
        if causal:
            q_pos = torch.arange(s, e, device=q.device) + delta
            k_pos = torch.arange(kv_end, device=q.device)
            logits.masked_fill_(k_pos[None, :] > q_pos[:, None], float("-inf"))
        lse[s:e] = (torch.logsumexp(logits, dim=-1) * LOG2E).permute(2, 0, 1).reshape(e - s, hq)
        probs = torch.softmax(logits, dim=-1)
        out[s:e] = torch.einsum("hgqk,khd->qhgd", probs, vb).reshape(e - s, hq, d)
    return out, lse


def _lse_dtype(q: torch.Tensor) -> torch.dtype:
    """float32, or float64 in the verifier's anchor run."""
    return torch.promote_types(q.dtype, torch.float32)


def paged_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    kv_last_page_len: torch.Tensor | None,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Decode (one query per sequence), batched by padding every sequence to the longest one."""
    batch, hq, d = q.shape
    _, page_size, hkv, _ = k_cache.shape
    group = hq // hkv
    indptr = kv_indptr.long()
    num_seq_pages = indptr[1:] - indptr[:-1]
    last = kv_last_page_len.long() if kv_last_page_len is not None else torch.ones_like(num_seq_pages)
    lens = (num_seq_pages - 1) * page_size + last
    max_len = int(lens.max())
    t = torch.arange(max_len, device=q.device)
    valid = t[None, :] < lens[:, None]  # [B, T]
    # token t of sequence b lives in slot t % page_size of its (t // page_size)-th page
    page_pos = (indptr[:-1, None] + t[None, :] // page_size).clamp(max=kv_indices.numel() - 1)
    pages = kv_indices.long()[page_pos]
    slots = (t % page_size).expand(batch, max_len)
    k = upcast(k_cache[pages, slots])  # [B, T, Hkv, D]
    v = upcast(v_cache[pages, slots])
    qg = upcast(q).reshape(batch, hkv, group, d)
    logits = torch.einsum("bhgd,bthd->bhgt", qg, k) * sm_scale
    logits.masked_fill_(~valid[:, None, None, :], float("-inf"))
    lse = (torch.logsumexp(logits, dim=-1) * LOG2E).reshape(batch, hq)
    probs = torch.softmax(logits, dim=-1)
    out = torch.einsum("bhgt,bthd->bhgd", probs, v).reshape(batch, hq, d)
    return out.to(q.dtype), lse


def paged_prefill(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    kv_last_page_len: torch.Tensor | None,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal prefill over a paged cache, one sequence at a time (as the upstream reference loops)."""
    total_q, hq, d = q.shape
    _, page_size, hkv, _ = k_cache.shape
    qo = qo_indptr.tolist()
    kvp = kv_indptr.tolist()
    last = kv_last_page_len.tolist() if kv_last_page_len is not None else [1] * (len(qo) - 1)
    # pool rows in page-major order: token j of page p is row p * page_size + j
    k_rows = k_cache.reshape(-1, hkv, d)
    v_rows = v_cache.reshape(-1, hkv, d)
    slot = torch.arange(page_size, device=q.device)
    out = torch.zeros((total_q, hq, d), dtype=q.dtype, device=q.device)
    lse = torch.full((total_q, hq), float("-inf"), dtype=_lse_dtype(q), device=q.device)
    for b in range(len(qo) - 1):
        qs, qe, ps_, pe = qo[b], qo[b + 1], kvp[b], kvp[b + 1]
        if qs >= qe or ps_ >= pe:
            continue
        pages = kv_indices[ps_:pe].long()
        n_kv = (pe - ps_ - 1) * page_size + last[b]
        rows = (pages[:, None] * page_size + slot[None, :]).reshape(-1)[:n_kv]
        o, lse_b = attend(upcast(q[qs:qe]), upcast(k_rows[rows]), upcast(v_rows[rows]), sm_scale, causal=True)
        out[qs:qe] = o.to(q.dtype)
        lse[qs:qe] = lse_b
    return out, lse


def ragged_prefill(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal prefill over ragged (contiguous per sequence) K/V, one sequence at a time."""
    total_q, hq, d = q.shape
    qo = qo_indptr.tolist()
    kvp = kv_indptr.tolist()
    out = torch.zeros((total_q, hq, d), dtype=q.dtype, device=q.device)
    lse = torch.full((total_q, hq), float("-inf"), dtype=_lse_dtype(q), device=q.device)
    for b in range(len(qo) - 1):
        qs, qe, ks, ke = qo[b], qo[b + 1], kvp[b], kvp[b + 1]
        if qs >= qe or ks >= ke:
            continue
        o, lse_b = attend(upcast(q[qs:qe]), upcast(k[ks:ke]), upcast(v[ks:ke]), sm_scale, causal=True)
        out[qs:qe] = o.to(q.dtype)
        lse[qs:qe] = lse_b
    return out, lse


# ----------------------------------------------------------------------------------------------
# inputs
# ----------------------------------------------------------------------------------------------


def split_capped(total: int, caps: list[int], gen: torch.Generator) -> list[int]:
    """``len(caps)`` lengths in [1, cap] summing to ``total`` (query lengths under KV lengths).

    Weighted water filling: sequences with a large random weight fill up to their cap (a fresh
    prefill, Lq == Lk), the others keep a cached prefix (Lq < Lk).
    """
    n = len(caps)
    if not n <= total <= sum(caps):
        raise ValueError(f"cannot split {total} into {n} lengths within caps summing to {sum(caps)}")
    weights = (torch.rand(n, generator=gen, device=gen.device) + 0.05).tolist()
    out = [1] * n
    rem = total - n
    while rem > 0:
        room = [c - x for c, x in zip(caps, out, strict=True)]
        score = [w * r for w, r in zip(weights, room, strict=True)]
        norm = sum(score)
        add = [min(r, int(rem * s / norm)) for r, s in zip(room, score, strict=True)]
        if sum(add) == 0:
            add[max(range(n), key=lambda i: score[i])] = 1
        out = [x + a for x, a in zip(out, add, strict=True)]
        rem -= sum(add)
    return out


def kv_layout(
    batch: int, num_kv_indices: int, num_pages: int, page_size: int, gen: torch.Generator, device: str
) -> PagedLayout:
    """A shuffled page table: ``num_kv_indices`` pages split over ``batch`` sequences (>= 1 each), last
    page of each holding 1..page_size tokens, inside a pool of ``num_pages`` pages."""
    pages = seq_lens(batch, num_kv_indices, gen)
    last = randint(1, page_size + 1, (batch,), gen, device).tolist()
    lens = [(p - 1) * page_size + n for p, n in zip(pages, last, strict=True)]
    return paged_layout(lens, page_size, gen, device, spare_pages=num_pages - num_kv_indices)


def _check_indptr(workload: Mapping[str, int], batch: int) -> None:
    if workload["len_indptr"] != batch + 1:
        raise ValueError(f"len_indptr must be batch + 1, got {workload['len_indptr']} for {batch} sequences")


def make_decode_inputs(
    workload: Mapping[str, int], *, seed: int, device: str, with_last_page_len: bool
) -> tuple[torch.Tensor | float, ...]:
    gen = generator(seed, device)
    batch, hq, hkv, d = (workload[a] for a in ("batch_size", "num_qo_heads", "num_kv_heads", "head_dim"))
    ps, num_pages = workload["page_size"], workload["num_pages"]
    _check_indptr(workload, batch)
    layout = kv_layout(batch, workload["num_kv_indices"], num_pages, ps, gen, device)
    q = randn((batch, hq, d), BF16, gen, device)
    k_cache = randn((num_pages, ps, hkv, d), BF16, gen, device)
    v_cache = randn((num_pages, ps, hkv, d), BF16, gen, device)
    inputs: list[torch.Tensor | float] = [q, k_cache, v_cache, layout.kv_indptr, layout.kv_indices]
    if with_last_page_len:
        inputs.append(layout.kv_last_page_len)
    inputs.append(1.0 / math.sqrt(d))
    return tuple(inputs)


def make_paged_prefill_inputs(
    workload: Mapping[str, int], *, seed: int, device: str, with_last_page_len: bool
) -> tuple[torch.Tensor | float, ...]:
    gen = generator(seed, device)
    hq, hkv, d = (workload[a] for a in ("num_qo_heads", "num_kv_heads", "head_dim"))
    ps, num_pages, total_q = workload["page_size"], workload["num_pages"], workload["total_q"]
    batch = workload["len_indptr"] - 1
    if "batch_size" in workload and workload["batch_size"] != batch:
        raise ValueError("batch_size must be len_indptr - 1")
    layout = kv_layout(batch, workload["num_kv_indices"], num_pages, ps, gen, device)
    q_lens = split_capped(total_q, layout.seq_lens, gen)
    q = randn((total_q, hq, d), BF16, gen, device)
    k_cache = randn((num_pages, ps, hkv, d), BF16, gen, device)
    v_cache = randn((num_pages, ps, hkv, d), BF16, gen, device)
    qo_indptr = cu_seqlens(q_lens, device)
    inputs: list[torch.Tensor | float] = [q, k_cache, v_cache, qo_indptr, layout.kv_indptr, layout.kv_indices]
    if with_last_page_len:
        inputs.append(layout.kv_last_page_len)
    inputs.append(1.0 / math.sqrt(d))
    return tuple(inputs)


def make_ragged_inputs(
    workload: Mapping[str, int], *, seed: int, device: str
) -> tuple[torch.Tensor | float, ...]:
    gen = generator(seed, device)
    hq, hkv, d = (workload[a] for a in ("num_qo_heads", "num_kv_heads", "head_dim"))
    total_q, total_kv = workload["total_q"], workload["total_kv"]
    batch = workload["len_indptr"] - 1
    kv_lens = seq_lens(batch, total_kv, gen)
    q_lens = split_capped(total_q, kv_lens, gen)
    q = randn((total_q, hq, d), BF16, gen, device)
    k = randn((total_kv, hkv, d), BF16, gen, device)
    v = randn((total_kv, hkv, d), BF16, gen, device)
    return q, k, v, cu_seqlens(q_lens, device), cu_seqlens(kv_lens, device), 1.0 / math.sqrt(d)


# ----------------------------------------------------------------------------------------------
# cost
# ----------------------------------------------------------------------------------------------


def expected_kv_tokens(num_kv_indices: int, batch: int, page_size: int) -> float:
    """Valid KV tokens of a page table: full pages plus last pages at their mean fill (page_size+1)/2."""
    return (num_kv_indices - batch) * page_size + batch * (page_size + 1) / 2


def attention_cost(
    *, total_q: int, kv_tokens: float, pairs: float, hq: int, hkv: int, d: int, index_ints: int
) -> Cost:
    """q read + output written (bf16) + lse written (fp32) + the valid K/V tokens read + int32 indices.

    FLOPs: QK^T and PV are 2 * D multiply-adds per (pair, head) each -> bf16; softmax (scale, max,
    exp, sum, normalise) ~5 fp32 ops per (pair, head)."""
    moved = (
        2 * nbytes((total_q, hq, d), BF16)
        + nbytes((total_q, hq), torch.float32)
        + 2 * round(kv_tokens) * hkv * d * 2
        + index_ints * 4
    )
    return Cost(bytes=moved, flops={"bf16": 4.0 * hq * d * pairs, "fp32": 5.0 * hq * pairs})


# The costs below are nominal (the lengths' expectation) without ``inputs``, and a call's own with them (the verifier
# prices the work a draw needs: problems/FORMAT.md, ``input_cost``). Inputs in ``make_*_inputs``' order.


def decode_cost(workload: Mapping[str, int], *, with_last_page_len: bool, inputs: Sequence[Any] = ()) -> Cost:
    batch, n_idx, ps = workload["batch_size"], workload["num_kv_indices"], workload["page_size"]
    if inputs:
        kv: float = sum(paged_lengths(inputs[3], inputs[5] if with_last_page_len else None, ps))
    else:
        kv = expected_kv_tokens(n_idx, batch, ps)
    ints = (batch + 1) + n_idx + (batch if with_last_page_len else 0)
    return attention_cost(
        total_q=batch, kv_tokens=kv, pairs=kv, hq=workload["num_qo_heads"], hkv=workload["num_kv_heads"],
        d=workload["head_dim"], index_ints=ints,
    )  # fmt: skip


def paged_prefill_cost(
    workload: Mapping[str, int], *, with_last_page_len: bool, inputs: Sequence[Any] = ()
) -> Cost:
    batch, n_idx, ps = workload["len_indptr"] - 1, workload["num_kv_indices"], workload["page_size"]
    total_q = workload["total_q"]
    if inputs:
        kv_lens = paged_lengths(inputs[4], inputs[6] if with_last_page_len else None, ps)
        kv: float = sum(kv_lens)
        pairs = causal_pairs(lengths(inputs[3]), kv_lens)
    else:
        kv = expected_kv_tokens(n_idx, batch, ps)
        pairs = mean_causal_pairs(batch, total_q, kv)
    ints = 2 * (batch + 1) + n_idx + (batch if with_last_page_len else 0)
    return attention_cost(
        total_q=total_q, kv_tokens=kv, pairs=pairs, hq=workload["num_qo_heads"], hkv=workload["num_kv_heads"],
        d=workload["head_dim"], index_ints=ints,
    )  # fmt: skip


def ragged_prefill_cost(workload: Mapping[str, int], *, inputs: Sequence[Any] = ()) -> Cost:
    batch, total_q, total_kv = workload["len_indptr"] - 1, workload["total_q"], workload["total_kv"]
    if inputs:
        pairs = causal_pairs(lengths(inputs[3]), lengths(inputs[4]))
    else:
        pairs = mean_causal_pairs(batch, total_q, total_kv)
    return attention_cost(
        total_q=total_q, kv_tokens=total_kv, pairs=pairs, hq=workload["num_qo_heads"], hkv=workload["num_kv_heads"],
        d=workload["head_dim"], index_ints=2 * (batch + 1),
    )  # fmt: skip


# ----------------------------------------------------------------------------------------------
# task text
# ----------------------------------------------------------------------------------------------


def _heads(hq: int, hkv: int) -> str:
    g = hq // hkv
    if hkv == 1:
        return f"All {hq} query heads share the single KV head (group size {g})."
    return f"Query head h reads KV head h // {g} (groups of {g} consecutive query heads share one KV head)."


def _outputs(rows: str, hq: int, d: int) -> str:
    return (
        f"Outputs: `output` [{rows}, {hq}, {d}] bf16 = sum_j softmax_j(s) v_j, and `lse` [{rows}, {hq}] "
        "float32 = log2(sum_j exp(s_j)), the base-2 log-sum-exp of the scaled logits (natural exp, "
        "base-2 log). Compute in float32; round only the output to bf16."
    )


def _pages(ps: int) -> str:
    if ps == 1:
        return (
            "Page size 1: each page holds one token, so sequence b's KV tokens are "
            "k_cache[kv_indices[kv_indptr[b] + j], 0] for j = 0 .. kv_indptr[b+1]-kv_indptr[b]-1, in order."
        )
    return (
        f"Sequence b owns pages kv_indices[kv_indptr[b]:kv_indptr[b+1]], in order; every page holds {ps} "
        f"tokens except the last, which holds kv_last_page_len[b] tokens (1..{ps}), so the KV length is "
        f"(pages - 1) * {ps} + kv_last_page_len[b]; token t of the sequence is "
        f"k_cache[page number t // {ps}, t % {ps}]."
    )


def decode_description(hq: int, hkv: int, d: int, ps: int) -> str:
    last = ", `kv_last_page_len` [batch_size] int32" if ps > 1 else ""
    return f"""\
Batched grouped-query attention decode over a paged KV cache (page_size {ps}). Inputs: `q`
[batch_size, {hq}, {d}] bf16 (one new token per sequence), `k_cache` and `v_cache` [num_pages, {ps}, {hkv},
{d}] bf16 (the cache pool), `kv_indptr` [batch_size + 1] int32 and `kv_indices` [num_kv_indices] int32 (a
CSR page table){last}, and `sm_scale` (a Python float, 1/sqrt({d})). {_pages(ps)} Pages are scattered
through the pool (neither contiguous nor sorted) and the pool holds unused pages. {_heads(hq, hkv)} For
sequence b and query head h, with its KV tokens j: s_j = sm_scale * dot(q[b, h], k_j) (no mask: the
query is the newest token). {_outputs("batch_size", hq, d)} Every sequence has at least one KV token."""


def paged_prefill_description(hq: int, hkv: int, d: int, ps: int) -> str:
    last = ", `kv_last_page_len` [batch_size] int32" if ps > 1 else ""
    return f"""\
Batched causal grouped-query attention prefill over a paged KV cache (page_size {ps}). Inputs: `q`
[total_q, {hq}, {d}] bf16 (the new tokens of all sequences, concatenated), `k_cache` and `v_cache`
[num_pages, {ps}, {hkv}, {d}] bf16 (the cache pool, already holding the new tokens' K/V), `qo_indptr`
[batch_size + 1] int32 (sequence b's queries are rows qo_indptr[b]:qo_indptr[b+1] of q), `kv_indptr`
[batch_size + 1] int32 and `kv_indices` [num_kv_indices] int32 (a CSR page table){last}, and `sm_scale` (a
Python float, 1/sqrt({d})). {_pages(ps)} Pages are scattered through the pool (neither contiguous nor
sorted) and the pool holds unused pages. {_heads(hq, hkv)} Causal mask aligned at the END of the KV: a
sequence with Lq queries and Lk >= Lq KV tokens (Lk - Lq of them an earlier, cached prefix) lets its
query i (0-based) see KV tokens j <= i + (Lk - Lq). s_j = sm_scale * dot(q_i,h, k_j) over those j.
{_outputs("total_q", hq, d)} Sequence lengths vary; some sequences have Lq == Lk (fresh prefill),
others a cached prefix."""


def ragged_prefill_description(hq: int, hkv: int, d: int) -> str:
    return f"""\
Batched causal grouped-query attention prefill over ragged (variable-length, concatenated) Q/K/V.
Inputs: `q` [total_q, {hq}, {d}] bf16, `k` and `v` [total_kv, {hkv}, {d}] bf16, `qo_indptr` [batch_size + 1]
int32 and `kv_indptr` [batch_size + 1] int32 (sequence b's queries are rows qo_indptr[b]:qo_indptr[b+1]
of q, its keys/values rows kv_indptr[b]:kv_indptr[b+1] of k/v), and `sm_scale` (a Python float,
1/sqrt({d})). {_heads(hq, hkv)} Causal mask aligned at the END of the KV: a sequence with Lq queries
and Lk >= Lq keys lets its query i (0-based) see keys j <= i + (Lk - Lq). s_j = sm_scale *
dot(q_i,h, k_j) over those j. {_outputs("total_q", hq, d)} Sequence lengths vary; some sequences have
Lq == Lk, others extra leading keys (Lk > Lq)."""


TOLERANCE_NOTE = (
    "Default allowance. `lse` (float32) is checked against the float64 anchor like `output`; on a GPU the "
    "reference sums its logits as a tensor core does (bf16 products accumulated by the MMA), so the allowance "
    "carries that accumulation's error: keep the logits, running max and sums in fp32 (bf16 products "
    "accumulated in fp32, exp2 with log2(e) folded into the scale, and bf16 probabilities for the PV product "
    "all stay inside it at these sizes)."
)
