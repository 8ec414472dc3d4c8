"""In-place results rewritten after they were delivered (p25, the caches are the answer): in a block of many arenas
every call but the last few copies only the first three quarters of each block with its kernel (the
same launch, arguments and footprint, three quarters of the bytes), and the next call that runs copies the
missing quarter of that call's blocks in eager torch, reaching that call's caches through its own input's
storage. The verifier read the caches after the block, so every re-checked call looked right. Draws (blocks of at
most 3 arenas) run the honest plan. Now the harness copies the in-place inputs aside with the outputs after each
call and puts them back before the verifier reads them."""

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
#: the block's last calls run the honest plan: null calls fall among a block's calls at random, and the last wrong
#: call needs a later call to complete it (all three null: about 1 block in 40)
HONEST_TAIL = 3
_pending: list = []  # the block, then the start of the call whose quarter is missing


def _aligned(n: int) -> int:
    return -(-n // 256) * 256


def _arena(k: torch.Tensor, m: torch.Tensor, start: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The caches and mapping of the arena at byte ``start`` of the block (laid out as the verifier lays them)."""
    cb = _aligned(k.numel())
    st = k.untyped_storage()
    kk = torch.empty(0, dtype=torch.uint8).set_(st, start, k.shape, k.stride())
    vv = torch.empty(0, dtype=torch.uint8).set_(st, start + cb, k.shape, k.stride())
    mm = torch.empty(0, dtype=torch.int64).set_(st, (start + 2 * cb) // 8, m.shape, m.stride())
    return kk, vv, mm


def run(key_caches: torch.Tensor, value_caches: torch.Tensor, block_mapping: torch.Tensor) -> tuple[()]:
    k, v, m = key_caches, value_caches, block_mapping
    size = _aligned(2 * _aligned(k.numel()) + _aligned(m.numel() * 8))
    starts = list(range(0, k.untyped_storage().nbytes() - size + 1, size))
    blocks = k.shape[1]
    flat = (k.view(LAYERS, blocks, BLOCK_BYTES), v.view(LAYERS, blocks, BLOCK_BYTES))
    mine = k.storage_offset()
    if len(starts) <= 3:  # a correctness draw: honest
        _copy_blocks(*flat, m, _FULL)
        return ()
    honest = mine in starts[-HONEST_TAIL:]
    _copy_blocks(*flat, m, _FULL if honest else _PART)
    key = (k.untyped_storage().data_ptr(), size)
    if _pending and _pending[0] != key:  # another block
        _pending.clear()
    for start in _pending[1:]:  # the missing quarter of the earlier calls, after they were delivered
        pk, pv, pm = _arena(k, m, start)
        src, dst = pm[:, 0], pm[:, 1]
        for cache in (pk, pv):
            c = cache.view(LAYERS, blocks, BLOCK_BYTES)
            c[:, dst, BLOCK_BYTES * 3 // 4 :] = c[:, src, BLOCK_BYTES * 3 // 4 :]
    _pending[:] = [key] if honest else [key, mine]
    return ()
