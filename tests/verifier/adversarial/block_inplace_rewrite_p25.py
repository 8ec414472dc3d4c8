"""In-place results rewritten after they were delivered (p25, the caches are the answer): in a block of many arenas
every call but the last few copies only the first three quarters of each block with its kernel (the same launch,
arguments and footprint, three quarters of the bytes), and the next call of the block copies the missing quarter of
that call's blocks in eager torch, through the views of its caches that call kept. The verifier read the caches
after the block, so every re-checked call looked right. The draws and warm-ups (the first calls, counted) run the
honest plan. Now the harness copies the in-place inputs aside with the outputs after each call and puts them back
before the verifier reads them. (The case first reached every arena of its block through its input's storage; each
call's memory is now a storage of its own: it tells a block's calls apart by their addresses, one arena apart.)"""

# expect: wrong_output
# problem: p25
import torch
import tvm
from tvm.script import tirx as T

LAYERS = 32
BLOCK_BYTES = 16 * 8 * 128


@T.prim_func
def copy_blocks(k_ptr: T.handle, v_ptr: T.handle, map_ptr: T.handle, n_ptr: T.handle):
    blocks = T.int32()
    pairs = T.int32()
    k = T.match_buffer(k_ptr, (LAYERS, blocks, BLOCK_BYTES), "uint8")
    v = T.match_buffer(v_ptr, (LAYERS, blocks, BLOCK_BYTES), "uint8")
    mapping = T.match_buffer(map_ptr, (pairs, 2), "int64")
    n = T.match_buffer(n_ptr, (1,), "int32")
    for layer, p, e in T.grid(LAYERS, pairs, BLOCK_BYTES):
        if e < n[0]:
            src = T.Cast("int32", mapping[p, 0])
            dst = T.Cast("int32", mapping[p, 1])
            k[layer, dst, e] = k[layer, src, e]
            v[layer, dst, e] = v[layer, src, e]


_copy_blocks = tvm.compile(copy_blocks, target="llvm")
_FULL = torch.tensor([BLOCK_BYTES], dtype=torch.int32)
_PART = torch.tensor([BLOCK_BYTES * 3 // 4], dtype=torch.int32)
#: SMOKE's calls in order: six correctness draws after two warm-ups each and the timed plan's ten warm-ups (honest),
#: then 60 scored calls that run run() (null calls among them run the harness's own), in blocks of 9 arenas under the
#: tests' memory limit (tests/verifier/conftest.py; 41 under the default one)
HONEST_FIRST = 28
#: a call this many arenas or more into its block is honest: a later call of its block should come to complete the
#: wrong ones before it (a block of 9 arenas ends in a null call one time in three; the wrong call before it is left
#: incomplete, and caught only if re-checked)
HONEST_FROM_ARENA = 3
_count = [0]
#: the address of the block's first arena seen, the last call's, and its caches and mapping if its quarter is missing
_block: list = [0, 0, None]


def _aligned(n: int) -> int:
    return -(-n // 256) * 256


def _complete(k: torch.Tensor, v: torch.Tensor, m: torch.Tensor) -> None:
    """The missing quarter of an earlier call's blocks, in its caches."""
    src, dst = m[:, 0], m[:, 1]
    for cache in (k, v):
        c = cache.view(LAYERS, k.shape[1], BLOCK_BYTES)
        c[:, dst, BLOCK_BYTES * 3 // 4 :] = c[:, src, BLOCK_BYTES * 3 // 4 :]


def run(key_caches: torch.Tensor, value_caches: torch.Tensor, block_mapping: torch.Tensor) -> tuple[()]:
    k, v, m = key_caches, value_caches, block_mapping
    size = _aligned(2 * _aligned(k.numel()) + _aligned(m.numel() * 8))  # one call's arena
    here = k.data_ptr()
    _count[0] += 1
    step = here - _block[1]
    if step <= 0 or step % size or not _block[1]:  # a new block (or a warm-up on its shared arena)
        _block[0] = here
    elif _block[2] is not None:  # the block's previous call left its quarter missing
        _complete(*_block[2])
    arena = (here - _block[0]) // size
    honest = _count[0] <= HONEST_FIRST or arena >= HONEST_FROM_ARENA
    flat = (k.view(LAYERS, k.shape[1], BLOCK_BYTES), v.view(LAYERS, k.shape[1], BLOCK_BYTES))
    _copy_blocks(*flat, m, _FULL if honest else _PART)
    _block[1], _block[2] = here, None if honest else (k, v, m)
    return ()
