"""Copy whole KV-cache blocks src -> dst in every layer's key and value cache at once (uint8 fp8 storage)."""

# Source: vLLM — copy_blocks(key_caches, value_caches, block_mapping) (csrc/cache_kernels.cu,
#   copy_blocks_kernel, grid (num_layers, num_pairs); tests/kernels/attention/test_cache.py
#   test_copy_blocks): for every layer and every pair (src, dst) of block_mapping [num_pairs, 2]
#   int64, key_cache[dst] = key_cache[src] and value_cache[dst] = value_cache[src]. Used for
#   copy-on-write of shared (forked / prefix-cached) blocks. Written from it.
# Production shape: Llama-3.1-8B with an fp8 KV cache stored as uint8 (32 layers, 8 KV heads,
#   head_dim 128, block size 16 -> 16 KiB per layer per block for K and for V); 256 copies in one call.
#   vLLM passes per-layer tensors; here the layers are stacked along a leading axis.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, random_bytes
from problems.kv_cache._util import cpu_gen

ID = "p25"
NAME = "batched_kv_cache_block_copy_remap_uint8"
FAMILY = "kv_cache"
SOURCE = "vLLM"
DESCRIPTION = """\
Batched block copy across all layers of a paged KV cache (copy-on-write remap).

Inputs:
- `key_caches`, `value_caches` [32, num_blocks, 16, 8, 128] uint8: per-layer paged K and V caches
  (fp8 codes stored as raw bytes), stacked along the leading layer axis; updated in place.
- `block_mapping` [num_pairs, 2] int64: rows (src, dst) of physical block ids.

Semantics: for every layer l and every pair (src, dst):
  key_caches[l, dst] = key_caches[l, src] and value_caches[l, dst] = value_caches[l, src]
(a block is 16 * 8 * 128 = 16384 bytes). Destinations are distinct and never appear as a source,
so the copies are independent; a source may be copied to several destinations. Every block that is
not a destination keeps its bytes. Nothing is returned."""
NOTES = ""
AXES = {
    "num_layers": 32,
    "num_blocks": "var",
    "block_size": 16,
    "num_kv_heads": 8,
    "head_dim": 128,
    "num_pairs": "var",
}
_CACHE = ("num_layers", "num_blocks", "block_size", "num_kv_heads", "head_dim")
INPUTS = {
    "key_caches": (_CACHE, "uint8"),
    "value_caches": (_CACHE, "uint8"),
    "block_mapping": (("num_pairs", 2), "int64"),
}
OUTPUTS: dict[str, tuple[tuple[str | int, ...], str]] = {}
INPLACE: tuple[str, ...] = ("key_caches", "value_caches")
WORKLOAD = {
    "num_layers": 32,
    "num_blocks": 1024,
    "block_size": 16,
    "num_kv_heads": 8,
    "head_dim": 128,
    "num_pairs": 256,
}
SMOKE = {**WORKLOAD, "num_blocks": 12, "num_pairs": 4}
TOLERANCE_NOTE = "Integer bytes: the caches must match exactly."


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    g = cpu_gen(gen)
    nb, pairs = workload["num_blocks"], workload["num_pairs"]
    if 2 * pairs > nb:
        raise ValueError("need at least two blocks per pair (destinations are never sources)")
    shape = tuple(workload[a] for a in _CACHE)
    key_caches = random_bytes(shape, gen, device)
    value_caches = random_bytes(shape, gen, device)
    perm = torch.randperm(nb, generator=g)
    dst = perm[:pairs]
    # sources come from the blocks that are not destinations, with repeats (one block forked twice)
    pool = perm[pairs:]
    src = pool[torch.randint(0, pool.numel(), (pairs,), generator=g)]
    block_mapping = torch.stack((src, dst), dim=1).to(torch.int64).to(device)
    return key_caches, value_caches, block_mapping


def reference(key_caches: torch.Tensor, value_caches: torch.Tensor, block_mapping: torch.Tensor) -> tuple[()]:
    src, dst = block_mapping[:, 0], block_mapping[:, 1]
    key_caches[:, dst] = key_caches[:, src]
    value_caches[:, dst] = value_caches[:, src]
    return ()


def cost(workload: dict[str, int]) -> Cost:
    per_block = nbytes(tuple(workload[a] for a in _CACHE[2:]), torch.uint8)
    copies = 2 * workload["num_layers"] * workload["num_pairs"]  # K and V of every layer
    moved = 2 * copies * per_block + nbytes((workload["num_pairs"], 2), torch.int64)
    return Cost(bytes=moved, flops={})
