"""Shared pieces of the kv_cache problems p19-p26 (vLLM cache-maintenance ops).

Conventions follow vLLM's public cache kernels (``csrc/cache_kernels.cu``, the Triton
``reshape_and_cache_flash`` family, ``vllm/v1/worker/gpu/block_table.py``):

* a paged cache is a pool ``[num_blocks, block_size, ...]``; token slot ``s`` lives in block
  ``s // block_size`` at row ``s % block_size``;
* ``slot_mapping[t] == -1`` marks a padding token (CUDA-graph padding): nothing is written for it;
* a block table row lists the physical blocks of one request in logical order, so logical
  position ``p`` of request ``b`` is slot ``block_table[b, p // block_size] * block_size + p % block_size``;
* ``cos_sin_cache[pos]`` holds ``rotary_dim / 2`` cosines followed by ``rotary_dim / 2`` sines.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from problems._common import seq_lens

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
#: FLT_MIN, the floor vLLM puts under an fp8_ds_mla tile scale
FLT_MIN = torch.finfo(torch.float32).tiny
#: bytes of one fp8_ds_mla cache entry: 512 e4m3 values, 4 fp32 tile scales, 64 bf16 rope values
DS_MLA_ENTRY_BYTES = 656
DS_MLA_NOPE = 512
DS_MLA_TILE = 128
DS_MLA_ROPE = 64


def cpu_gen(gen: torch.Generator) -> torch.Generator:
    """A CPU generator derived deterministically from ``gen`` (index structures are built on CPU)."""
    if gen.device.type == "cpu":
        return gen
    seed = int(torch.randint(0, 2**62, (1,), generator=gen, device=gen.device).item())
    return torch.Generator().manual_seed(seed)


def math_dtype(like: torch.Tensor) -> torch.dtype:
    """float64 when the verifier's anchor run passed float64, else float32 (upcast math for fp8/uint8 data)."""
    return torch.float64 if like.dtype == torch.float64 else torch.float32


# ----------------------------------------------------------------------------------------------
# reference math
# ----------------------------------------------------------------------------------------------


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim of an already upcast ``x``; returns upcast values."""
    w = weight.to(x.dtype)
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * w


def rope_neox(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """NeoX rotation of the first ``2 * cos.shape[-1]`` dims of ``x`` [T, H, D]; the rest pass through.

    ``cos``/``sin`` are [T, rotary_dim / 2]; element i pairs with element i + rotary_dim / 2.
    """
    half = cos.shape[-1]
    c, s = cos[:, None, :], sin[:, None, :]
    x1, x2, rest = x[..., :half], x[..., half : 2 * half], x[..., 2 * half :]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s, rest), dim=-1)


def rope_gptj(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """GPT-J (interleaved) rotation of ``x`` [T, H, rotary_dim]: pair (2i, 2i + 1) turns by angle i."""
    c, s = cos[:, None, :], sin[:, None, :]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)


def split_slots(slot_mapping: torch.Tensor, block_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mask of real tokens, and (block, row) of each real token's slot."""
    valid = slot_mapping >= 0
    slots = slot_mapping[valid]
    return valid, torch.div(slots, block_size, rounding_mode="floor"), slots % block_size


# ----------------------------------------------------------------------------------------------
# input builders
# ----------------------------------------------------------------------------------------------


def rope_cache(max_position: int, rotary_dim: int, base: float, device: str | torch.device) -> torch.Tensor:
    """vLLM's float32 ``cos_sin_cache`` [max_position, rotary_dim]: cos of each frequency, then sin."""
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float32) / rotary_dim))
    t = torch.arange(max_position, dtype=torch.float32)
    freqs = torch.outer(t, inv_freq)
    return torch.cat((freqs.cos(), freqs.sin()), dim=-1).to(device)


@dataclass(frozen=True)
class PagedBatch:
    """A ragged batch of ``num_seqs`` requests appending tokens to a paged cache (vLLM V1 layout).

    Request ``b`` already holds ``context_lens[b]`` tokens and appends ``query_lens[b]`` more at
    positions ``context_lens[b] ...``; tokens are packed request after request, then ``num_padding``
    padding tokens (position 0, slot -1).
    """

    query_lens: list[int]
    context_lens: list[int]
    positions: torch.Tensor  # [num_tokens] int64
    slot_mapping: torch.Tensor  # [num_tokens] int64, -1 for padding
    block_table: torch.Tensor  # [num_seqs, max_pages] int32, unused entries 0


def paged_batch(
    query_lens: Sequence[int],
    context_lens: Sequence[int],
    num_padding: int,
    num_blocks: int,
    block_size: int,
    gen: torch.Generator,
    device: str | torch.device,
) -> PagedBatch:
    """Distinct random pages for every request; slots follow the block table, padding is -1."""
    g = cpu_gen(gen)
    pages = [math.ceil((c + q) / block_size) for q, c in zip(query_lens, context_lens, strict=True)]
    if sum(pages) > num_blocks:
        raise ValueError(f"batch needs {sum(pages)} blocks but the cache has {num_blocks}")
    perm = torch.randperm(num_blocks, generator=g).to(torch.int64)
    table = torch.zeros((len(pages), max(pages)), dtype=torch.int64)
    positions, slots = [], []
    start = 0
    for b, (q, c, n) in enumerate(zip(query_lens, context_lens, pages, strict=True)):
        table[b, :n] = perm[start : start + n]
        start += n
        pos = torch.arange(c, c + q, dtype=torch.int64)
        positions.append(pos)
        slots.append(table[b, pos // block_size] * block_size + pos % block_size)
    positions.append(torch.zeros(num_padding, dtype=torch.int64))
    slots.append(torch.full((num_padding,), -1, dtype=torch.int64))
    return PagedBatch(
        query_lens=list(query_lens),
        context_lens=list(context_lens),
        positions=torch.cat(positions).to(device),
        slot_mapping=torch.cat(slots).to(device),
        block_table=table.to(torch.int32).to(device),
    )


def ragged_append_batch(
    num_tokens: int,
    num_seqs: int,
    num_padding: int,
    num_blocks: int,
    block_size: int,
    max_context: int,
    gen: torch.Generator,
    device: str | torch.device,
) -> PagedBatch:
    """Ragged query lengths summing to ``num_tokens - num_padding`` on top of random contexts that fit the pool."""
    g = cpu_gen(gen)
    qlens, ctx = ragged_lengths(num_tokens - num_padding, num_seqs, num_blocks, block_size, max_context, g)
    return paged_batch(qlens, ctx, num_padding, num_blocks, block_size, g, device)


def ragged_lengths(
    num_real: int, num_seqs: int, num_blocks: int, block_size: int, max_context: int, gen: torch.Generator
) -> tuple[list[int], list[int]]:
    """Query lengths summing to ``num_real`` and context lengths whose pages fit ``num_blocks``."""
    qlens = seq_lens(num_seqs, num_real, gen)
    ctx = torch.randint(0, max_context + 1, (num_seqs,), generator=gen).tolist()

    def pages(cs: list[int]) -> int:
        return sum(math.ceil((c + q) / block_size) for c, q in zip(cs, qlens, strict=True))

    while pages(ctx) > num_blocks and any(ctx):
        ctx = [c // 2 for c in ctx]
    return qlens, ctx


@dataclass(frozen=True)
class GatherLayout:
    """Per-request spans to read out of a paged cache: ``seq_lens[b]`` tokens from logical ``seq_starts[b]``."""

    seq_lens: list[int]
    seq_starts: list[int]
    block_table: torch.Tensor  # [num_seqs, max_blocks_per_seq] int32, unused entries 0


def gather_layout(
    num_seqs: int,
    total_tokens: int,
    max_start: int,
    num_blocks: int,
    block_size: int,
    max_blocks_per_seq: int,
    gen: torch.Generator,
    device: str | torch.device,
) -> GatherLayout:
    """Ragged spans (some starting mid-block) whose pages are distinct random blocks of the pool."""
    g = cpu_gen(gen)
    lens = seq_lens(num_seqs, total_tokens, g)
    cap = max_blocks_per_seq * block_size
    if max(lens) > cap:
        raise ValueError(f"a span of {max(lens)} tokens exceeds the block-table capacity {cap}")
    starts = [int(torch.randint(0, min(max_start, cap - n) + 1, (1,), generator=g)) for n in lens]

    def pages(ss: list[int]) -> list[int]:
        return [math.ceil((s + n) / block_size) for s, n in zip(ss, lens, strict=True)]

    while sum(pages(starts)) > num_blocks and any(starts):
        starts = [s // 2 for s in starts]
    need = pages(starts)
    if sum(need) > num_blocks:
        raise ValueError(f"spans need {sum(need)} blocks but the cache has {num_blocks}")
    perm = torch.randperm(num_blocks, generator=g).to(torch.int32)
    table = torch.zeros((num_seqs, max_blocks_per_seq), dtype=torch.int32)
    at = 0
    for b, n in enumerate(need):
        table[b, :n] = perm[at : at + n]
        at += n
    return GatherLayout(seq_lens=lens, seq_starts=starts, block_table=table.to(device))


def gather_token_rows(
    block_table: torch.Tensor, seq_lens_t: torch.Tensor, seq_starts: torch.Tensor, block_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(block, row) in the pool of every gathered token, requests concatenated in order."""
    lens = seq_lens_t.to(torch.int64)
    req = torch.repeat_interleave(torch.arange(lens.numel(), device=lens.device), lens)
    first = torch.cumsum(lens, 0) - lens
    pos = torch.arange(req.numel(), device=lens.device) - first[req] + seq_starts.to(torch.int64)[req]
    blocks = block_table.to(torch.int64)[req, torch.div(pos, block_size, rounding_mode="floor")]
    return blocks, pos % block_size


def fp8_codes(shape: Sequence[int], gen: torch.Generator, device: str | torch.device, *, scale: float) -> torch.Tensor:
    """Random e4m3 values (normal draws times ``scale``, saturated to +-448): stale cache contents."""
    x = torch.randn(tuple(shape), generator=gen, device=device, dtype=torch.float32) * scale
    return x.clamp(-FP8_MAX, FP8_MAX).to(FP8)


def pack_ds_mla(kv_c: torch.Tensor, k_pe: torch.Tensor) -> torch.Tensor:
    """vLLM ``fp8_ds_mla`` entries [N, 656] uint8 from bf16 ``kv_c`` [N, 512] and ``k_pe`` [N, 64].

    Bytes 0-511: e4m3 of kv_c / tile_scale, one tile per 128 values; bytes 512-527: the four fp32
    tile scales (amax / 448, floored at FLT_MIN); bytes 528-655: k_pe as raw bf16.
    """
    n = kv_c.shape[0]
    x = kv_c.float().view(n, DS_MLA_NOPE // DS_MLA_TILE, DS_MLA_TILE)
    scale = (x.abs().amax(dim=-1) / FP8_MAX).clamp_min(FLT_MIN)
    q = (x / scale[..., None]).clamp(-FP8_MAX, FP8_MAX).to(FP8).view(n, DS_MLA_NOPE)
    out = torch.empty((n, DS_MLA_ENTRY_BYTES), dtype=torch.uint8, device=kv_c.device)
    out[:, :DS_MLA_NOPE] = q.view(torch.uint8)
    out[:, DS_MLA_NOPE : DS_MLA_NOPE + 16] = scale.contiguous().view(torch.uint8)
    out[:, DS_MLA_NOPE + 16 :] = k_pe.to(torch.bfloat16).contiguous().view(torch.uint8)
    return out
