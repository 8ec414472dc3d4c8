"""Shared helpers for the moe family: tie-free routing draws, fp8 block quantisation, EP slices."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from problems._common import randint

FP8_MAX = 448.0  # largest finite float8_e4m3fn


def redraw_rows(
    draw: Callable[[], torch.Tensor],
    margin: Callable[[torch.Tensor], torch.Tensor],
    min_margin: float,
    *,
    max_redraws: int = 200,
) -> torch.Tensor:
    """Draw a [rows, ...] tensor and redraw the rows whose deciding margin is too small.

    ``margin(x)`` returns one value per row: the smallest gap that decides that
    row's discrete routing choice. Rows at or below ``min_margin`` would let a
    correct kernel pick a different expert through rounding alone, so they are
    replaced by fresh draws until every row is clear.
    """
    x = draw()
    for _ in range(max_redraws):
        bad = margin(x) <= min_margin
        if not bool(bad.any()):
            return x
        fresh = draw()
        x = torch.where(bad.view(-1, *([1] * (x.dim() - 1))), fresh, x)
    raise RuntimeError("could not draw routing inputs without near-ties")


def grouped_topk_margin(
    scores: torch.Tensor, n_group: int, topk_group: int, top_k: int, *, ordered: bool = False
) -> torch.Tensor:
    """Per-row margin of DeepSeek-style group-limited top-k on selection ``scores`` [T, E].

    The choice is decided by (a) the gap between the ``topk_group``-th and next
    group score (sum of a group's two largest scores) and (b) the gap between the
    ``top_k``-th and next score inside the kept groups; with ``ordered`` every
    consecutive gap among the top ``top_k + 1`` counts, so a score-sorted id list is unique.
    """
    s = scores.to(torch.float64)
    rows, experts = s.shape
    per_group = experts // n_group
    group = s.view(rows, n_group, per_group).topk(2, dim=-1).values.sum(-1)
    gs = group.sort(dim=-1, descending=True).values
    group_gap = gs[:, topk_group - 1] - gs[:, topk_group]
    keep = torch.zeros_like(group, dtype=torch.bool).scatter_(1, group.topk(topk_group, dim=-1).indices, True)
    masked = s.masked_fill(~keep.repeat_interleave(per_group, dim=1), -math.inf)
    top = masked.topk(top_k + 1, dim=-1).values
    consecutive = top[:, :-1] - top[:, 1:]
    expert_gap = consecutive.min(dim=-1).values if ordered else consecutive[:, top_k - 1]
    return torch.minimum(group_gap, expert_gap)


def topk_margin(scores: torch.Tensor, top_k: int) -> torch.Tensor:
    """Per-row gap between the ``top_k``-th and next largest of ``scores`` [T, E] (float64)."""
    top = scores.to(torch.float64).topk(top_k + 1, dim=-1).values
    return top[:, top_k - 1] - top[:, top_k]


def block_quantize_fp8(
    x: torch.Tensor, block_rows: int, block_cols: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantise a 2-D float tensor to float8_e4m3fn with one float32 scale per block.

    Each [block_rows, block_cols] block is scaled so its largest magnitude maps to
    448 (the DeepSeek-V3 recipe); returns (fp8 values, scales [rows/br, cols/bc])
    with x ≈ fp8 * scale broadcast over the block.
    """
    rows, cols = x.shape
    blocks = x.float().view(rows // block_rows, block_rows, cols // block_cols, block_cols)
    amax = blocks.abs().amax(dim=(1, 3)).clamp_min(1e-12)
    scale = amax / FP8_MAX
    q = (blocks / scale[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.view(rows, cols), scale.contiguous()


def local_expert_offset(num_experts: int, num_local: int, gen: torch.Generator, device: str) -> int:
    """First global expert id of a random expert-parallel rank holding ``num_local`` experts."""
    return int(randint(0, num_experts // num_local, (1,), gen, device).item()) * num_local


def expected_local_pairs(tokens: int, top_k: int, num_local: int, num_experts: int) -> float:
    """Expected (token, expert) pairs that land on one EP rank under uniform routing (for cost)."""
    return tokens * top_k * num_local / num_experts


def local_pairs(chosen: torch.Tensor, offset: int, num_local: int) -> float:
    """(token, expert) pairs of a routing (``chosen`` expert ids) that land on the rank holding experts
    ``[offset, offset + num_local)``: what a call's expert GEMMs compute (for ``input_cost``)."""
    return float(((chosen >= offset) & (chosen < offset + num_local)).sum())
