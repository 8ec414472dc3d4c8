"""Batched KV-cache block copy (p25) for the cpu backend: the caches are updated in place and
nothing is returned. Eager PyTorch only flattens each block to its 16384 bytes (a view, no copy);
one TIRx kernel built for the llvm target copies every (src, dst) block of every layer."""

import torch
import tvm
from tvm.script import tirx as T

LAYERS = 32
BLOCK_BYTES = 16 * 8 * 128


@T.prim_func
def copy_blocks(k_ptr: T.handle, v_ptr: T.handle, map_ptr: T.handle):
    blocks = T.int32()
    pairs = T.int32()
    k = T.match_buffer(k_ptr, (LAYERS, blocks, BLOCK_BYTES), "uint8")
    v = T.match_buffer(v_ptr, (LAYERS, blocks, BLOCK_BYTES), "uint8")
    mapping = T.match_buffer(map_ptr, (pairs, 2), "int64")
    for layer, p, e in T.grid(LAYERS, pairs, BLOCK_BYTES):
        src = T.Cast("int32", mapping[p, 0])
        dst = T.Cast("int32", mapping[p, 1])
        k[layer, dst, e] = k[layer, src, e]
        v[layer, dst, e] = v[layer, src, e]


_copy_blocks = tvm.compile(copy_blocks, target="llvm")


def run(key_caches: torch.Tensor, value_caches: torch.Tensor, block_mapping: torch.Tensor) -> tuple[()]:
    blocks = key_caches.shape[1]
    _copy_blocks(
        key_caches.view(LAYERS, blocks, BLOCK_BYTES), value_caches.view(LAYERS, blocks, BLOCK_BYTES), block_mapping
    )
    return ()
