"""p20 mla_rope_compressed_cache_update_bf16 — plan `fused`, CuTe DSL: one kernel for q_pe, k_pe and the cache entry.

Plan: one CTA of 288 threads per token (8192 CTAs at the production shape). Warps 0-7 rotate the
token's 128 query heads: a head is 64 bf16 = 8 16-byte vectors, thread t owns lane l = t % 8 of the
heads t // 8 + 32 k (k = 0..3), so it issues its 4 16-byte q_pe loads before any math (every warp
instruction reads 512 contiguous bytes), loads cos/sin of its 4 GPT-J pairs 4l..4l+3 once (two
16-byte float32 loads of the position's row, L1/L2 resident), rotates each pair in float32
((x0 c - x1 s, x1 c + x0 s), one bf16 rounding) and stores 16 bytes to q_pe_out. Warp 8 writes the
576-wide cache entry when slot >= 0: lane w copies kv_c vectors w and w + 32 (bit copies) and lanes
0-7 also rotate k_pe vector w into entry vector 64 + w. Padding tokens (slot -1) still get q_pe_out
but touch no cache entry. Every byte is read once and written once. The cache is updated in place
(the kernel splits slot into block and row). All sizes are symbolic: one compilation, cached, called
with torch tensors through TVM FFI.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor

HEADS = 128
ROPE = 64
RANK = 512
ENTRY = RANK + ROPE  # 576
BLOCK = 64
VEC = 8  # bf16 per 16-byte vector
PAIRS = VEC // 2  # GPT-J pairs per vector
HEAD_VECS = ROPE // VEC  # 8 lanes per head
Q_THREADS = 256
Q_ITERS = HEADS * HEAD_VECS // Q_THREADS  # 4 q_pe vectors per thread
HEAD_STRIDE = Q_THREADS // HEAD_VECS  # 32 heads between a thread's vectors
LAT_VECS = RANK // VEC  # 64 kv_c vectors per token
KV_THREADS = 32
THREADS = Q_THREADS + KV_THREADS


@cute.jit
def _rotate(r: cute.Tensor, rC: cute.Tensor, rS: cute.Tensor, dst: cute.Tensor):
    x = r.load().to(cutlass.Float32)
    y = cute.make_rmem_tensor((VEC,), cutlass.Float32)
    for m in cutlass.range_constexpr(PAIRS):
        x0 = x[2 * m]
        x1 = x[2 * m + 1]
        y[2 * m] = x0 * rC[m] - x1 * rS[m]
        y[2 * m + 1] = x1 * rC[m] + x0 * rS[m]
    out = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    out.store(y.load().to(cutlass.BFloat16))
    cute.autovec_copy(out, dst)


@cute.kernel
def _mla_kernel(
    mQ: cute.Tensor,
    mKV: cute.Tensor,
    mKPE: cute.Tensor,
    mPos: cute.Tensor,
    mCS: cute.Tensor,
    mSlot: cute.Tensor,
    mC: cute.Tensor,
    mO: cute.Tensor,
):
    tidx, _, _ = cute.arch.thread_idx()
    tok, _, _ = cute.arch.block_idx()
    # ((1, 1, VEC), (tokens, 128, 8)) q views, ((1, VEC), (tokens, vectors)) row views,
    # ((1, 4), (max_position, 16)) cos/sin view (4 float32 = 16 bytes), ((1, 1, VEC), (blocks, 64, 72)) cache
    gQ = cute.zipped_divide(mQ, (1, 1, VEC))
    gO = cute.zipped_divide(mO, (1, 1, VEC))
    gKV = cute.zipped_divide(mKV, (1, VEC))
    gKPE = cute.zipped_divide(mKPE, (1, VEC))
    gCS = cute.zipped_divide(mCS, (1, PAIRS))
    gC = cute.zipped_divide(mC, (1, 1, VEC))
    pos = cutlass.Int32(mPos[tok])
    if tidx < Q_THREADS:
        lane = tidx % HEAD_VECS
        head0 = tidx // HEAD_VECS
        xs = []
        for k in cutlass.range_constexpr(Q_ITERS):
            r = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
            cute.autovec_copy(gQ[(0, 0, None), (tok, head0 + k * HEAD_STRIDE, lane)], r)
            xs.append(r)
        # cos of pairs 4 lane .. 4 lane + 3 is 16-byte vector `lane` of the row, sin is vector 8 + lane
        rC = cute.make_rmem_tensor((PAIRS,), cutlass.Float32)
        rS = cute.make_rmem_tensor((PAIRS,), cutlass.Float32)
        cute.autovec_copy(gCS[(0, None), (pos, lane)], rC)
        cute.autovec_copy(gCS[(0, None), (pos, HEAD_VECS + lane)], rS)
        for k in cutlass.range_constexpr(Q_ITERS):
            _rotate(xs[k], rC, rS, gO[(0, 0, None), (tok, head0 + k * HEAD_STRIDE, lane)])
    else:
        w = tidx - Q_THREADS
        slot = cutlass.Int32(mSlot[tok])
        if slot >= 0:
            blk = slot // BLOCK
            row = slot % BLOCK
            r0 = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
            r1 = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
            cute.autovec_copy(gKV[(0, None), (tok, w)], r0)
            cute.autovec_copy(gKV[(0, None), (tok, w + KV_THREADS)], r1)
            if w < HEAD_VECS:
                rk = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
                cute.autovec_copy(gKPE[(0, None), (tok, w)], rk)
                rC = cute.make_rmem_tensor((PAIRS,), cutlass.Float32)
                rS = cute.make_rmem_tensor((PAIRS,), cutlass.Float32)
                cute.autovec_copy(gCS[(0, None), (pos, w)], rC)
                cute.autovec_copy(gCS[(0, None), (pos, HEAD_VECS + w)], rS)
                _rotate(rk, rC, rS, gC[(0, 0, None), (blk, row, LAT_VECS + w)])
            cute.autovec_copy(r0, gC[(0, 0, None), (blk, row, w)])
            cute.autovec_copy(r1, gC[(0, 0, None), (blk, row, w + KV_THREADS)])


@cute.jit
def _mla(
    mQ: cute.Tensor,
    mKV: cute.Tensor,
    mKPE: cute.Tensor,
    mPos: cute.Tensor,
    mCS: cute.Tensor,
    mSlot: cute.Tensor,
    mC: cute.Tensor,
    mO: cute.Tensor,
):
    tokens = cute.size(mQ, mode=[0])
    _mla_kernel(mQ, mKV, mKPE, mPos, mCS, mSlot, mC, mO).launch(grid=[tokens, 1, 1], block=[THREADS, 1, 1])


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        tokens, max_pos, blocks = cute.sym_int(), cute.sym_int(), cute.sym_int()
        q = make_fake_compact_tensor(cutlass.BFloat16, (tokens, HEADS, ROPE), stride_order=(2, 1, 0), assumed_align=16)
        kv = make_fake_compact_tensor(cutlass.BFloat16, (tokens, RANK), stride_order=(1, 0), assumed_align=16)
        kpe = make_fake_compact_tensor(cutlass.BFloat16, (tokens, ROPE), stride_order=(1, 0), assumed_align=16)
        idx = make_fake_compact_tensor(cutlass.Int64, (tokens,), assumed_align=8)
        cs = make_fake_compact_tensor(cutlass.Float32, (max_pos, ROPE), stride_order=(1, 0), assumed_align=16)
        cache = make_fake_compact_tensor(
            cutlass.BFloat16, (blocks, BLOCK, ENTRY), stride_order=(2, 1, 0), assumed_align=16
        )
        _COMPILED.append(cute.compile(_mla, q, kv, kpe, idx, cs, idx, cache, q, options="--enable-tvm-ffi"))
    return _COMPILED[0]


def run(
    q_pe: torch.Tensor,
    kv_c: torch.Tensor,
    k_pe: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    kv_cache: torch.Tensor,
) -> torch.Tensor:
    q = q_pe.contiguous()
    out = torch.empty_like(q)
    if q.shape[0] == 0:
        return out
    # kv_cache is updated in place (passed as it is: the kernel splits slots into block and row)
    _compiled()(
        q,
        kv_c.contiguous(),
        k_pe.contiguous(),
        positions.contiguous(),
        cos_sin_cache.contiguous(),
        slot_mapping.contiguous(),
        kv_cache,
        out,
    )
    return out
