"""p22 main_index_dual_cache_insert_minimax_m3_bf16 — plan `fused`, CuTe DSL: one scatter kernel for K, V and index K.

Plan: one kernel does the whole insert. A token's used columns are 144 16-byte vectors (64 of key,
64 of value, contiguous at qkv columns 8192..9215, and 16 of index key at columns 9728..9855).
72 threads own a token and each thread moves the vectors `lane` and `lane + 72`: it loads both
16-byte vectors from qkv (issued together with the two int64 slot loads, so the loads do not wait
on the slot) and stores each one to key_cache[slot], value_cache[slot] or index_cache[index_slot],
skipping a store whose slot is -1. A CTA of 288 threads covers 4 tokens (2048 CTAs at the
production shape); warps read and write contiguous 16-byte runs, every byte is read once and
written once. The caches are passed as they are (in place); the kernel splits a slot into
block and row. All sizes are symbolic: one compilation, cached, called with torch tensors through TVM FFI.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor

QKV = 9856
DIM = 128
KV = 4 * DIM  # key (or value) values per token
VEC = 8  # bf16 per 16-byte vector
K_VEC0 = 64 * DIM // VEC  # first key vector of a qkv row (1024); value vectors follow
IK_VEC0 = (64 * DIM + 3 * KV) // VEC  # first index-key vector (1216)
KV_VECS = KV // VEC  # 64
HEAD_VECS = DIM // VEC  # 16
BLOCK = 128
TOKEN_VECS = 2 * KV_VECS + DIM // VEC  # 144
LANES = TOKEN_VECS // 2  # 72 threads per token, 2 vectors each
TOKENS_PER_CTA = 4
THREADS = LANES * TOKENS_PER_CTA


@cute.kernel
def _insert_kernel(
    mQKV: cute.Tensor,
    mSlot: cute.Tensor,
    mISlot: cute.Tensor,
    mKC: cute.Tensor,
    mVC: cute.Tensor,
    mIC: cute.Tensor,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    tokens = cute.size(mQKV, mode=[0])
    tok = bidx * TOKENS_PER_CTA + tidx // LANES
    lane = tidx % LANES
    if tok < tokens:
        # ((1, VEC), (rows, vectors per row)) views: one 16-byte vector per index
        gQ = cute.zipped_divide(mQKV, (1, VEC))
        # ((1, 1, 1, VEC), (blocks, 128, heads, 16)) and ((1, 1, VEC), (blocks, 128, 16)) cache views
        gK = cute.zipped_divide(mKC, (1, 1, 1, VEC))
        gV = cute.zipped_divide(mVC, (1, 1, 1, VEC))
        gI = cute.zipped_divide(mIC, (1, 1, VEC))
        slot = cutlass.Int32(mSlot[tok])
        islot = cutlass.Int32(mISlot[tok])
        blk, row = slot // BLOCK, slot % BLOCK
        iblk, irow = islot // BLOCK, islot % BLOCK
        regs = []
        for j in cutlass.range_constexpr(2):
            v = lane + j * LANES
            col = K_VEC0 + v
            if v >= 2 * KV_VECS:
                col = IK_VEC0 + v - 2 * KV_VECS
            r = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
            cute.autovec_copy(gQ[(0, None), (tok, col)], r)
            regs.append(r)
        for j in cutlass.range_constexpr(2):
            v = lane + j * LANES
            if v < KV_VECS:
                if slot >= 0:
                    cute.autovec_copy(regs[j], gK[(0, 0, 0, None), (blk, row, v // HEAD_VECS, v % HEAD_VECS)])
            elif v < 2 * KV_VECS:
                if slot >= 0:
                    w = v - KV_VECS
                    cute.autovec_copy(regs[j], gV[(0, 0, 0, None), (blk, row, w // HEAD_VECS, w % HEAD_VECS)])
            else:
                if islot >= 0:
                    cute.autovec_copy(regs[j], gI[(0, 0, None), (iblk, irow, v - 2 * KV_VECS)])


@cute.jit
def _insert(
    mQKV: cute.Tensor,
    mSlot: cute.Tensor,
    mISlot: cute.Tensor,
    mKC: cute.Tensor,
    mVC: cute.Tensor,
    mIC: cute.Tensor,
):
    tokens = cute.size(mQKV, mode=[0])
    _insert_kernel(mQKV, mSlot, mISlot, mKC, mVC, mIC).launch(
        grid=[(tokens + TOKENS_PER_CTA - 1) // TOKENS_PER_CTA, 1, 1], block=[THREADS, 1, 1]
    )


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        tokens, blocks, iblocks = cute.sym_int(), cute.sym_int(), cute.sym_int()
        qkv = make_fake_compact_tensor(cutlass.BFloat16, (tokens, QKV), stride_order=(1, 0), assumed_align=16)
        slot = make_fake_compact_tensor(cutlass.Int64, (tokens,), assumed_align=8)
        cache = make_fake_compact_tensor(
            cutlass.BFloat16, (blocks, BLOCK, KV // DIM, DIM), stride_order=(3, 2, 1, 0), assumed_align=16
        )
        icache = make_fake_compact_tensor(
            cutlass.BFloat16, (iblocks, BLOCK, DIM), stride_order=(2, 1, 0), assumed_align=16
        )
        _COMPILED.append(cute.compile(_insert, qkv, slot, slot, cache, cache, icache, options="--enable-tvm-ffi"))
    return _COMPILED[0]


def run(
    qkv: torch.Tensor,
    slot_mapping: torch.Tensor,
    index_slot_mapping: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    index_cache: torch.Tensor,
) -> tuple[()]:
    if qkv.shape[0] == 0:
        return ()
    # the caches are updated in place (no views: the kernel splits slots into block and row)
    _compiled()(
        qkv.contiguous(),
        slot_mapping.contiguous(),
        index_slot_mapping.contiguous(),
        key_cache,
        value_cache,
        index_cache,
    )
    return ()
