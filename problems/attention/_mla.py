"""Shared pieces of the attention problems p10-p18 (MLA / DSA from FlashInfer-Trace, and the SOL ones).

MLA in its absorbed form (DeepSeek-V3, FlashInfer-Trace `mla_paged` / `dsa_paged`): every query head
reads the same compressed cache row, a 512-wide latent ``ckv`` plus a 64-wide rotary key ``kpe``;
logits are ``sm_scale * (q_nope . ckv + q_pe . kpe)`` and the value IS the latent ``ckv``, so the
output is 512 wide. ``lse`` is the base-2 log-sum-exp of the scaled logits (natural exp, base-2 log).
"""

from __future__ import annotations

import math

import torch

from problems._common import seq_lens

LOG2E = 1.0 / math.log(2.0)
#: query rows per block in the references: bounds the [H, rows, Lk] logits of the float64 anchor
CHUNK_Q = 1024
BF16 = torch.bfloat16


def lse_dtype(x: torch.Tensor) -> torch.dtype:
    """float32, or float64 in the verifier's anchor run."""
    return torch.promote_types(x.dtype, torch.float32)


def mla_attend(
    qn: torch.Tensor,
    qp: torch.Tensor,
    kc: torch.Tensor,
    kp: torch.Tensor,
    sm_scale: float,
    *,
    prefix: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Absorbed MLA for one sequence (inputs already upcast).

    qn [Lq, H, Dc], qp [Lq, H, Dp], kc [Lk, Dc], kp [Lk, Dp] -> out [Lq, H, Dc], lse2 [Lq, H].
    ``prefix`` switches on the causal mask: query i sits at KV position ``prefix + i`` and sees keys
    ``j <= prefix + i``; ``None`` means every query sees every key.
    """
    lq, h, dc = qn.shape
    lk = kc.shape[0]
    out = qn.new_empty((lq, h, dc))
    lse = qn.new_empty((lq, h))
    for s in range(0, lq, CHUNK_Q):
        e = min(s + CHUNK_Q, lq)
        # keys past the last query of this block are masked for every row of it
        kv_end = lk if prefix is None else min(lk, prefix + e)
        kcb, kpb = kc[:kv_end], kp[:kv_end]
        logits = (
            torch.einsum("qhd,kd->hqk", qn[s:e], kcb) + torch.einsum("qhd,kd->hqk", qp[s:e], kpb)
        ) * sm_scale
        if prefix is not None:
            q_pos = torch.arange(s, e, device=qn.device) + prefix
            k_pos = torch.arange(kv_end, device=qn.device)
            logits.masked_fill_(k_pos[None, :] > q_pos[:, None], float("-inf"))
        lse[s:e] = (torch.logsumexp(logits, dim=-1) * LOG2E).transpose(0, 1)
        probs = torch.softmax(logits, dim=-1)
        out[s:e] = torch.einsum("hqk,kd->qhd", probs, kcb)
    return out, lse


def bounded_seq_lens(
    batch: int, total: int, gen: torch.Generator, *, cap: int, minimum: int = 1, tries: int = 100
) -> list[int]:
    """``seq_lens`` redrawn until no length exceeds ``cap`` (a block table has a fixed width)."""
    for _ in range(tries):
        lens = seq_lens(batch, total, gen, minimum=minimum)
        if max(lens) <= cap:
            return lens
    raise RuntimeError(f"could not split {total} tokens into {batch} sequences of at most {cap}")


def block_table(
    kv_indptr: torch.Tensor, kv_indices: torch.Tensor, max_num_pages: int, *, fill: int = -1
) -> torch.Tensor:
    """A dense [batch, max_num_pages] int32 block table from a CSR page table; unused entries = ``fill``."""
    indptr = kv_indptr.tolist()
    batch = len(indptr) - 1
    table = torch.full((batch, max_num_pages), fill, dtype=torch.int32, device=kv_indices.device)
    for b in range(batch):
        n = indptr[b + 1] - indptr[b]
        table[b, :n] = kv_indices[indptr[b] : indptr[b + 1]]
    return table


def latent_grid(n: int) -> tuple[int, int]:
    """(height, width) of the most square grid of ``n`` tokens (height <= width)."""
    h = math.isqrt(n)
    while n % h:
        h -= 1
    return h, n // h
