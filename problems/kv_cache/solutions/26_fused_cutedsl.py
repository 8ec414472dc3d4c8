"""p26 hybrid_kv_group_block_table_update_slot_mapping_int32_int64 — plan `fused`, CuTe DSL: one kernel.

Plan: one kernel, grid num_reqs + num_updates + 1 CTAs of 256 threads. CTA b < num_reqs owns batch row
b and its request slot r = idx_mapping[b]: each warp finds the update u with update_req_indices[u] ==
r (lane-strided compare, butterfly max over the warp, -1 if none). If there is one, every thread gets,
per group, cnt = update_counts[g, u], the offset of u's ids first = Σ_{v<u} update_counts[g, v]
(lane-strided sum + butterfly), start = 0 if update_overwrite[u] else num_blocks[g, r], and the CTA
writes block_tables[g, r, start + j] = update_block_ids[g, first + j] (j strided over the threads). A
CTA barrier then makes the new entries visible to the whole CTA (and orders every read of the old
num_blocks before thread 0 writes num_blocks[g, r] = start + cnt); the CTA then maps its tokens qsl[b]
.. qsl[b+1]-1, 512 per pass (2 per thread, the position and table loads of both issued before the
stores; the first pass's positions are loaded before the update phase): slot = block_tables[g, r, p //
bs] * bs + p % bs in int64, for both groups. Only this CTA touches row r, so no grid-wide ordering is
needed. CTA num_reqs + u applies update u only when its slot is not scheduled (no batch row would),
and the last CTA writes -1 to the padded tail qsl[num_reqs] .. max_num_tokens-1. Positions are divided
in int32 (they index a table row, so p < max_num_blocks · bs < 2^31). All sizes are symbolic: one
compilation, cached, called with torch tensors through TVM FFI.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor

NG = 2  # KV-cache groups
THREADS = 256
UNROLL = 2  # tokens per thread per pass
PER_PASS = THREADS * UNROLL


@cute.jit
def _warp_max(x: cutlass.Int32) -> cutlass.Int32:
    for i in cutlass.range_constexpr(5):
        o = cute.arch.shuffle_sync_bfly(x, offset=16 >> i)
        if o > x:
            x = o
    return x


@cute.jit
def _clamp(t: cutlass.Int32, hi: cutlass.Int32) -> cutlass.Int32:
    """min(t, hi), and 0 if that is negative (an empty row): always a valid token index."""
    if t > hi:
        t = hi
    if t < 0:
        t = cutlass.Int32(0)
    return t


@cute.jit
def _warp_sum(x: cutlass.Int32) -> cutlass.Int32:
    for i in cutlass.range_constexpr(5):
        x = x + cute.arch.shuffle_sync_bfly(x, offset=16 >> i)
    return x


@cute.kernel
def _step_kernel(
    mBT: cute.Tensor,
    mNB: cute.Tensor,
    mBS: cute.Tensor,
    mUR: cute.Tensor,
    mUO: cute.Tensor,
    mUC: cute.Tensor,
    mUI: cute.Tensor,
    mIM: cute.Tensor,
    mQSL: cute.Tensor,
    mPos: cute.Tensor,
    mOut: cute.Tensor,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    num_updates = cute.size(mUR, mode=[0])
    num_reqs = cute.size(mIM, mode=[0])
    max_tokens = cute.size(mPos, mode=[0])
    lane = tidx % 32
    r = cutlass.Int32(0)
    u = cutlass.Int32(-1)
    t0 = cutlass.Int32(0)
    t1 = cutlass.Int32(0)
    pre0 = cutlass.Int32(0)
    pre1 = cutlass.Int32(0)
    if bidx < num_reqs:
        # batch row bidx: its slot, its tokens, and the update of that slot (if any)
        r = mIM[bidx]
        t0 = mQSL[bidx]
        t1 = mQSL[bidx + 1]
        # the first pass's positions do not depend on the update: load them now (clamped)
        pre0 = cutlass.Int32(mPos[_clamp(t0 + tidx, t1 - 1)])
        pre1 = cutlass.Int32(mPos[_clamp(t0 + THREADS + tidx, t1 - 1)])
        for j in cutlass.range(lane, num_updates, 32):
            if mUR[j] == r:
                u = j
        u = _warp_max(u)
    elif bidx < num_reqs + num_updates:
        # update bidx - num_reqs, applied here only if no batch row owns its slot
        u = bidx - num_reqs
        r = mUR[u]
        hit = cutlass.Int32(0)
        for j in cutlass.range(lane, num_reqs, 32):
            if mIM[j] == r:
                hit = cutlass.Int32(1)
        hit = _warp_max(hit)
        if hit > 0:
            u = cutlass.Int32(-1)
    # u and r are uniform over the CTA from here on; with u = -1 every count below is 0 (loads stay in range)
    uu = u
    if u < 0:
        uu = cutlass.Int32(0)
    start = []
    cnt = []
    for g in cutlass.range_constexpr(NG):
        part = cutlass.Int32(0)
        for j in cutlass.range(lane, u, 32):
            part = part + mUC[g, j]
        first = _warp_sum(part)
        c = mUC[g, uu]
        if u < 0:
            c = cutlass.Int32(0)
        s = mNB[g, r]
        if mUO[uu] != 0:
            s = cutlass.Int32(0)
        start.append(s)
        cnt.append(c)
        for j in cutlass.range(tidx, c, THREADS):
            mBT[g, r, s + j] = mUI[g, first + j]
    # the new entries are visible to the CTA, and every read of the old num_blocks is done
    cute.arch.sync_threads()
    writer = tidx  # thread 0 writes the new counts, unless there is no update
    if u < 0:
        writer = cutlass.Int32(-1)
    if writer == 0:
        for g in cutlass.range_constexpr(NG):
            mNB[g, r] = start[g] + cnt[g]
    bs = [mBS[g] for g in range(NG)]
    for base in cutlass.range(t0, t1, PER_PASS):
        # clamped loads (always in the row), guarded stores
        pos = []
        for k in cutlass.range_constexpr(UNROLL):
            p = pre0 if k == 0 else pre1
            if base != t0:
                p = cutlass.Int32(mPos[_clamp(base + k * THREADS + tidx, t1 - 1)])
            pos.append(p)
        blk = []
        for k in cutlass.range_constexpr(UNROLL):
            blk.append([mBT[g, r, pos[k] // bs[g]] for g in range(NG)])
        for k in cutlass.range_constexpr(UNROLL):
            t = base + k * THREADS + tidx
            if t < t1:
                for g in cutlass.range_constexpr(NG):
                    q = pos[k] // bs[g]
                    mOut[g, t] = cutlass.Int64(blk[k][g]) * cutlass.Int64(bs[g]) + cutlass.Int64(pos[k] - q * bs[g])
    if bidx == num_reqs + num_updates:
        # padded tail
        for t in cutlass.range(mQSL[num_reqs] + tidx, max_tokens, THREADS):
            for g in cutlass.range_constexpr(NG):
                mOut[g, t] = cutlass.Int64(-1)


@cute.jit
def _step(
    mBT: cute.Tensor,
    mNB: cute.Tensor,
    mBS: cute.Tensor,
    mUR: cute.Tensor,
    mUO: cute.Tensor,
    mUC: cute.Tensor,
    mUI: cute.Tensor,
    mIM: cute.Tensor,
    mQSL: cute.Tensor,
    mPos: cute.Tensor,
    mOut: cute.Tensor,
):
    grid = cute.size(mIM, mode=[0]) + cute.size(mUR, mode=[0]) + 1
    _step_kernel(mBT, mNB, mBS, mUR, mUO, mUC, mUI, mIM, mQSL, mPos, mOut).launch(
        grid=[grid, 1, 1], block=[THREADS, 1, 1]
    )


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        reqs, width, upd, new, nreq, qlen, tokens = (cute.sym_int() for _ in range(7))

        def compact(dtype, shape, align=4):
            order = tuple(range(len(shape) - 1, -1, -1))
            return make_fake_compact_tensor(dtype, shape, stride_order=order, assumed_align=align)

        i32 = cutlass.Int32
        _COMPILED.append(
            cute.compile(
                _step,
                compact(i32, (NG, reqs, width)),
                compact(i32, (NG, reqs)),
                compact(i32, (NG,)),
                compact(i32, (upd,)),
                compact(i32, (upd,)),
                compact(i32, (NG, upd)),
                compact(i32, (NG, new)),
                compact(i32, (nreq,)),
                compact(i32, (qlen,)),
                compact(cutlass.Int64, (tokens,), 8),
                compact(cutlass.Int64, (NG, tokens), 8),
                options="--enable-tvm-ffi",
            )
        )
    return _COMPILED[0]


def run(
    block_tables: torch.Tensor,
    num_blocks: torch.Tensor,
    block_sizes: torch.Tensor,
    update_req_indices: torch.Tensor,
    update_overwrite: torch.Tensor,
    update_counts: torch.Tensor,
    update_block_ids: torch.Tensor,
    idx_mapping: torch.Tensor,
    query_start_loc: torch.Tensor,
    positions: torch.Tensor,
) -> torch.Tensor:
    kernel = _compiled()
    out = torch.empty((NG, positions.shape[0]), dtype=torch.int64, device=positions.device)
    # block_tables and num_blocks are updated in place (they are contiguous state tensors)
    kernel(
        block_tables,
        num_blocks,
        block_sizes,
        update_req_indices,
        update_overwrite,
        update_counts,
        update_block_ids,
        idx_mapping,
        query_start_loc,
        positions,
        out,
    )
    return out
