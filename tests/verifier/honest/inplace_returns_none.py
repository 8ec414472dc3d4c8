"""Honest: p25's in-place block copy (source block to destination block in every layer, keys and values) in one
TIRx kernel over int32 words, returning None as the problem's text says ("Nothing is returned"), where the
reference returns an empty tuple: both are what an in-place problem returns."""

# problem: p25
# thorough: ~12 s on two cores: p25's 12.6 MB caches copied aside and compared on every watched call
import torch
import tvm
from tvm.script import tirx as T

WORDS = 16 * 8 * 128 // 4  # int32 words per block: block_size * kv_heads * head_dim bytes


@T.prim_func
def copy_blocks(k_ptr: T.handle, v_ptr: T.handle, map_ptr: T.handle):
    layers = T.int32()
    blocks = T.int32()
    pairs = T.int32()
    k = T.match_buffer(k_ptr, (layers, blocks, WORDS), "int32")
    v = T.match_buffer(v_ptr, (layers, blocks, WORDS), "int32")
    mapping = T.match_buffer(map_ptr, (pairs, 2), "int64")
    for layer, p, e in T.grid(layers, pairs, WORDS):
        src = T.Cast("int32", mapping[p, 0])
        dst = T.Cast("int32", mapping[p, 1])
        k[layer, dst, e] = k[layer, src, e]
        v[layer, dst, e] = v[layer, src, e]


_copy = tvm.compile(copy_blocks, target="llvm")


def run(key_caches: torch.Tensor, value_caches: torch.Tensor, block_mapping: torch.Tensor) -> None:
    layers, blocks = key_caches.shape[0], key_caches.shape[1]
    _copy(
        key_caches.view(layers, blocks, -1).view(torch.int32),
        value_caches.view(layers, blocks, -1).view(torch.int32),
        block_mapping.contiguous(),
    )
