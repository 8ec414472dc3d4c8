"""MiniMax-M3 sparse layer: insert K/V into the main paged cache and the index key into the indexer cache (bf16)."""

# Source: vLLM — MiniMax-M3 sparse attention (vllm/models/minimax_m3): the fused projection emits
#   [q | k | v | index_q | index_k] per token; after QK-norm + RoPE the layer inserts k/v into the
#   main paged cache (reshape_and_cache_flash, slot_mapping) and index_k into the key-only indexer
#   side cache (minimax_m3_insert_index_cache: [num_blocks, block_size, head_dim], its own
#   index_slot_mapping), each slot -1 meaning padding. Written from those semantics.
# Production shape: MiniMax-M3 at TP=1 (64 query heads, 4 KV heads, 4 index heads, head_dim 128,
#   index dim 128, sparse block = KV page = 128 tokens); an 8192-token step over 16 ragged requests
#   with 64 padding tokens. The main and index caches are separate KV-cache groups with their own
#   block tables, hence their own slot mappings.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn
from problems.kv_cache._util import cpu_gen, paged_batch, ragged_lengths, split_slots

ID = "p22"
NAME = "main_index_dual_cache_insert_minimax_m3_bf16"
FAMILY = "kv_cache"
SOURCE = "vLLM"
DESCRIPTION = """\
MiniMax-M3 dual cache insert, bf16: scatter each token's key/value heads into the main paged KV
cache and its index key into the indexer's key-only cache, in one pass over the fused projection.

Inputs:
- `qkv` [num_tokens, 9856] bf16: per token, 64 query heads (8192 values), 4 key heads (512),
  4 value heads (512), 4 index-query heads (512), then one index key (128); every head is 128
  contiguous values. Only the key, value and index-key columns are used here.
- `slot_mapping` [num_tokens] int64: main-cache slot of each token; -1 marks a padding token.
- `index_slot_mapping` [num_tokens] int64: index-cache slot of each token; -1 marks padding.
- `key_cache`, `value_cache` [num_blocks, 128, 4, 128] bf16: main paged caches, updated in place.
- `index_cache` [num_index_blocks, 128, 128] bf16: indexer cache, updated in place.

Semantics, per token t:
- if s = slot_mapping[t] >= 0: key_cache[s // 128, s % 128] = the 4 key heads of qkv[t] and
  value_cache[s // 128, s % 128] = the 4 value heads;
- if r = index_slot_mapping[t] >= 0: index_cache[r // 128, r % 128] = the index key of qkv[t].
Values are copied exactly. Padding tokens write nothing; every other entry of the three caches
keeps its contents. Slots are distinct within each mapping. Nothing is returned."""
NOTES = ""
AXES = {
    "num_tokens": "var",
    "num_seqs": "var",
    "num_padding": "var",
    "qkv_size": 9856,
    "num_heads": 64,
    "num_kv_heads": 4,
    "num_index_heads": 4,
    "head_dim": 128,
    "num_blocks": "var",
    "num_index_blocks": "var",
    "block_size": 128,
}
_KV = ("num_blocks", "block_size", "num_kv_heads", "head_dim")
INPUTS = {
    "qkv": (("num_tokens", "qkv_size"), "bfloat16"),
    "slot_mapping": (("num_tokens",), "int64"),
    "index_slot_mapping": (("num_tokens",), "int64"),
    "key_cache": (_KV, "bfloat16"),
    "value_cache": (_KV, "bfloat16"),
    "index_cache": (("num_index_blocks", "block_size", "head_dim"), "bfloat16"),
}
OUTPUTS: dict[str, tuple[tuple[str | int, ...], str]] = {}
INPLACE: tuple[str, ...] = ("key_cache", "value_cache", "index_cache")
WORKLOAD = {
    "num_tokens": 8192,
    "num_seqs": 16,
    "num_padding": 64,
    "qkv_size": 9856,
    "num_heads": 64,
    "num_kv_heads": 4,
    "num_index_heads": 4,
    "head_dim": 128,
    "num_blocks": 512,
    "num_index_blocks": 512,
    "block_size": 128,
}
SMOKE = {**WORKLOAD, "num_tokens": 40, "num_seqs": 3, "num_padding": 3, "num_blocks": 6, "num_index_blocks": 7}
TOLERANCE_NOTE = "A pure copy: the caches must match the anchor exactly (any error is a misplaced write)."

NUM_HEADS = 64
NUM_INDEX_HEADS = 4


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    g = cpu_gen(gen)
    t, pad, b = workload["num_tokens"], workload["num_padding"], workload["num_seqs"]
    hkv, d, bs = workload["num_kv_heads"], workload["head_dim"], workload["block_size"]
    nb, nib = workload["num_blocks"], workload["num_index_blocks"]
    max_ctx = 2 * min(nb, nib) * bs // (3 * b)
    qlens, ctx = ragged_lengths(t - pad, b, min(nb, nib), bs, max_ctx, g)
    # same requests and positions, two cache groups with independent block tables
    main = paged_batch(qlens, ctx, pad, nb, bs, g, device)
    index = paged_batch(qlens, ctx, pad, nib, bs, g, device)
    qkv = randn((t, workload["qkv_size"]), torch.bfloat16, gen, device)
    key_cache = randn((nb, bs, hkv, d), torch.bfloat16, gen, device)
    value_cache = randn((nb, bs, hkv, d), torch.bfloat16, gen, device)
    index_cache = randn((nib, bs, d), torch.bfloat16, gen, device)
    return qkv, main.slot_mapping, index.slot_mapping, key_cache, value_cache, index_cache


def reference(
    qkv: torch.Tensor,
    slot_mapping: torch.Tensor,
    index_slot_mapping: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    index_cache: torch.Tensor,
) -> tuple[()]:
    t = qkv.shape[0]
    _, bs, hkv, d = key_cache.shape
    kv = hkv * d
    # layout [q | k | v | index_q | index_k]
    q_size = NUM_HEADS * d
    k_start = q_size
    v_start = k_start + kv
    index_k_start = v_start + kv + NUM_INDEX_HEADS * d
    k = qkv[:, k_start:v_start].reshape(t, hkv, d)
    v = qkv[:, v_start : v_start + kv].reshape(t, hkv, d)
    index_k = qkv[:, index_k_start : index_k_start + d]
    valid, blk, row = split_slots(slot_mapping, bs)
    key_cache[blk, row] = k[valid].to(key_cache.dtype)
    value_cache[blk, row] = v[valid].to(value_cache.dtype)
    ivalid, iblk, irow = split_slots(index_slot_mapping, index_cache.shape[1])
    index_cache[iblk, irow] = index_k[ivalid].to(index_cache.dtype)
    return ()


def cost(workload: dict[str, int]) -> Cost:
    t, pad, hkv, d = workload["num_tokens"], workload["num_padding"], workload["num_kv_heads"], workload["head_dim"]
    n = t - pad
    per_token = nbytes((2 * hkv * d + d,), torch.bfloat16)  # k, v, index_k
    moved = 2 * n * per_token + 2 * nbytes((t,), torch.int64)  # read once, write once
    return Cost(bytes=moved, flops={})
