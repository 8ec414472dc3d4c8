"""TIRx sm_90a causal prefill on WGMMA with a deeper K/V ring, instantiated by the p04-p09 `NN_wgmmapipe_tirx.py`.

The `wgmma` template (`_flash_prefill_wgmma_tirx.py`: same CTA, tiles, layouts, softmax and epilogue) copies
K(j+1) and V(j) while the tensor cores run tile j and waits for ALL of its copies at the next tile's barrier,
so every KV tile pays the full latency of a 64 KB burst that had one tile's compute to land, and nothing is
in flight while a CTA waits. This plan keeps the copies TWO tiles ahead (DESIGN §5: the same one kernel):

- the K ring holds three tiles: while S(j) reads K(j), K(j+1) is landing and K(j+2) is being copied;
- the V ring holds ``v_ahead + 1`` tiles: at head dim 128, V(j+1) is copied while P(j-1)·V(j-1) runs
  (three tiles, the 227 KB of shared memory a CTA may have: 32 KB of Q, six 32 KB K/V tiles, 2 KB of row
  lists); at head dim 256 the Q tile is 64 KB, so V stays one tile ahead (two tiles) and K two;
- each KV tile commits two cp.async groups, V's then K's, even when one is empty (its tile lies past the
  walk), so the barrier of tile j waits with ``wait_group(v_ahead)``: it needs K(j) and V(j-1) landed and
  leaves the ``v_ahead`` newest groups in flight (V(j) and K(j+1), or only K(j+1));
- the page-table row lists (a ring of four) are filled three tiles ahead, one barrier before K's copy reads
  them: the table load is issued beside the copies and its row stored after the softmax, so no warp waits on
  it before its softmax (plan `wgmma` stores it at once, stalling the first warpgroup for a load latency);
- a buffer is overwritten only after the wgmma group reading it retired before the latest barrier.

Compiled once per (total_q, KV pool rows, batch, page-table length) and cached (`FlashPrefillSm90.__call__`).
"""

from __future__ import annotations

import tvm
from tvm.script import tirx as T

from problems.attention.solutions._flash_prefill import NEG_BIG, acc_col, acc_row, copy_row, kv_row
from problems.attention.solutions._flash_prefill_sm90 import (
    BM,
    ROWS_PER_GROUP_BYTES,
    SWIZZLE_128B,
    THREADS,
    WG_ROWS,
    Sm90Tiling,
    k_major_step,
    mn_major_step,
    panel_bytes,
    panel_chunk,
)
from problems.attention.solutions._flash_prefill_wgmma_tirx import WGMMA_BF16, FlashPrefillSm90

K_AHEAD = 2  # K(j + 2) is copied while S(j) runs
K_RING = K_AHEAD + 1
ROW_RING = 4  # tile j reads row lists j (or j + 1) and j + 2 and fills j + 3: four live lists
SMEM_LIMIT = 232448  # bytes of shared memory one CTA may opt into on sm_90 (227 KB)


def v_ahead(t: Sm90Tiling) -> int:
    """Tiles ahead V is copied: two where six K/V tiles fit beside Q (head dim 128), else one."""
    return 2 if t.d == 128 else 1


def smem_bytes(t: Sm90Tiling) -> int:
    """Q tile, the K and V rings (bf16) and the row-list ring (int32)."""
    tile = t.bn * t.d * 2
    return BM * t.d * 2 + (K_RING + v_ahead(t) + 1) * tile + ROW_RING * t.bn * 4


class FlashPrefillPipe(FlashPrefillSm90):
    """The `wgmma` template's kernel with the K/V copies two tiles ahead (`shape_key` and ``__call__`` shared)."""

    def __init__(self, tiling: Sm90Tiling) -> None:
        need, limit = smem_bytes(tiling), SMEM_LIMIT
        if need > limit:
            raise ValueError(f"the K/V rings need {need} B of shared memory, over the {limit} B a CTA may have")
        super().__init__(tiling)

    def build(self, total_q: int, kv_rows: int, batch: int, n_table: int, n_last: int) -> tvm.runtime.Module:
        t = self.t
        hq, hkv, group, d, page, bn = t.hq, t.hkv, t.group, t.d, t.page, t.bn
        chunks, row_step, kv_loads, q_loads = t.chunks, t.row_step, t.kv_loads, t.q_loads
        s_regs, o_regs = t.s_regs, t.o_regs
        va = v_ahead(t)
        v_ring = va + 1
        k_steps = d // 16  # k-steps of S = Q K^T
        pv_steps = bn // 16  # k-steps of O += P V
        sbo = ROWS_PER_GROUP_BYTES >> 4  # descriptor fields count 16-byte units
        v_lbo = panel_bytes(bn) >> 4
        tile_bytes = bn * d * 2  # one K or V buffer
        grid = t.grid_tiles(total_q, batch) * hq
        mma_s, mma_o = WGMMA_BF16[bn], WGMMA_BF16[d]

        @T.prim_func
        def prefill(
            q_ptr: T.handle,
            k_ptr: T.handle,
            v_ptr: T.handle,
            qo_ptr: T.handle,
            kvp_ptr: T.handle,
            table_ptr: T.handle,
            last_ptr: T.handle,
            o_ptr: T.handle,
            lse_ptr: T.handle,
            scale2: T.float32,
        ):
            Q = T.match_buffer(q_ptr, (total_q, hq, d), "bfloat16")
            K = T.match_buffer(k_ptr, (kv_rows, hkv, d), "bfloat16")
            V = T.match_buffer(v_ptr, (kv_rows, hkv, d), "bfloat16")
            QO = T.match_buffer(qo_ptr, (batch + 1,), "int32")
            KVP = T.match_buffer(kvp_ptr, (batch + 1,), "int32")
            TABLE = T.match_buffer(table_ptr, (n_table,), "int32")
            LAST = T.match_buffer(last_ptr, (n_last,), "int32")
            OUT = T.match_buffer(o_ptr, (total_q, hq, d), "bfloat16")
            LSE = T.match_buffer(lse_ptr, (total_q, hq), "float32")
            T.device_entry()
            bid = T.cta_id([grid])
            tx = T.thread_id([THREADS])
            pool = T.SMEMPool()
            sq = pool.alloc((BM * d,), "bfloat16", align=1024)
            sk = pool.alloc((K_RING, bn * d), "bfloat16", align=1024)
            sv = pool.alloc((v_ring, bn * d), "bfloat16", align=1024)
            srows = pool.alloc((ROW_RING, bn), "int32", align=16)  # pool rows of walk tile j in srows[j % 4]
            pool.commit()
            s = T.alloc_local((s_regs,), "float32")  # S(j) of this thread's two rows
            o = T.alloc_local((o_regs,), "float32")
            p_cur = T.alloc_local((s_regs,), "bfloat16")  # P(j-1): the A operand in flight
            p_new = T.alloc_local((s_regs,), "bfloat16")  # P(j)
            p_cur_w = p_cur.view("uint32")
            m_run = T.alloc_local((2,), "float32")
            l_run = T.alloc_local((2,), "float32")
            alpha = T.alloc_local((2,), "float32")
            desc = T.alloc_local((3,), "uint64")  # Q (this warpgroup's rows), K(0) buffer, V(0) buffer
            row_next = T.alloc_local((1,), "int32")  # the pool row `fetch_row` loaded, until `store_row`
            h = T.meta_var(bid % hq)
            kvh = T.meta_var(bid % hq // group)
            wg = T.meta_var(tx // 128)
            warp = T.meta_var(tx % 128 // 32)  # warp of the warpgroup: its 16 rows of the m64 tile
            lane = T.meta_var(tx % 32)
            cc = T.meta_var(tx % chunks)  # the 16-byte chunk this thread copies in every row

            @T.inline
            def fetch_row(j, kv0, lk, ntile):
                # pool row of this thread's token of walk tile j (KV tile ntile - 1 - j), one thread a token:
                # a page-table load issued here and stored by `store_row` a softmax later, so no warp waits on it
                if j < ntile:  # noqa: SIM102 (TIR conditions, one per if)
                    if tx < bn:
                        row_next[0] = kv_row(TABLE, kv0, T.min((ntile - 1 - j) * bn + tx, lk - 1), page)

            @T.inline
            def store_row(j, ntile):
                if j < ntile:  # noqa: SIM102 (TIR conditions, one per if)
                    if tx < bn:
                        srows[j % ROW_RING, tx] = row_next[0]

            @T.inline
            def copy_tile(dst, src, j, ring, ntile):
                # walk tile j into buffer j % ring; a tile past the walk copies nothing (its group stays empty)
                if j < ntile:
                    for i in T.unroll(kv_loads):
                        r = T.meta_var(copy_row(tx, i, row_step, chunks))
                        T.ptx.cp.async_.cg.shared.global_(
                            dst.ptr_to([j % ring, panel_chunk(r, cc, bn) * 8]),
                            src.ptr_to([srows[j % ROW_RING, r], kvh, cc * 8]),
                            16,
                        )
                T.ptx.cp.async_.commit_group()

            @T.inline
            def refill(j, kv0, lk, ntile):
                # while tile j is on the tensor cores: the page-table load of row list j + 3, then the copies of
                # V(j + v_ahead - 1) and K(j + 2)
                fetch_row(j + K_AHEAD + 1, kv0, lk, ntile)
                copy_tile(sv, V, j + va - 1, v_ring, ntile)
                copy_tile(sk, K, j + K_AHEAD, K_RING, ntile)

            @T.inline
            def publish(in_flight):
                # this thread's copies but the newest `in_flight` groups landed; hand them to the async proxy
                # wgmma reads through; then everyone's
                T.ptx.cp.async_.wait_group(in_flight)
                T.ptx.fence.proxy.async_.shared__cta()
                T.cuda.cta_sync()

            @T.inline
            def issue_s(j):
                for kk in T.unroll(k_steps):
                    mma_s(
                        *[s[i] for i in range(s_regs)],
                        desc[0] + T.uint64(k_major_step(kk, BM) >> 4),
                        desc[1] + T.uint64((j % K_RING * tile_bytes + k_major_step(kk, bn)) >> 4),
                        kk > 0, 1, 1, 0, 0,
                    )  # fmt: skip
                T.ptx.wgmma.commit_group.sync.aligned()

            @T.inline
            def issue_pv(j):
                # O += P(j) V(j): P's k-step kk is registers 4kk..4kk+3 (the S n8 tiles 2kk, 2kk + 1)
                for kk in T.unroll(pv_steps):
                    mma_o(
                        *[o[i] for i in range(o_regs)],
                        p_cur_w[4 * kk], p_cur_w[4 * kk + 1], p_cur_w[4 * kk + 2], p_cur_w[4 * kk + 3],
                        desc[2] + T.uint64((j % v_ring * tile_bytes + mn_major_step(kk)) >> 4),
                        True, 1, 1, 1,
                    )  # fmt: skip
                T.ptx.wgmma.commit_group.sync.aligned()

            @T.inline
            def softmax(j, m0, delta, ntile):
                # S(j) has landed: scale it (the first use of each register, after the wait), mask, exponentiate
                n = T.meta_var(ntile - 1 - j)
                for i in T.unroll(s_regs):
                    T.ptx.mul.f32(s[i], s[i], scale2)
                if (n + 1) * bn > m0 + delta + 1:  # the tile crosses the causal diagonal of the CTA's first row
                    for jt in T.unroll(bn // 8):
                        for c in T.unroll(4):
                            qi = T.meta_var(m0 + wg * WG_ROWS + warp * 16 + acc_row(lane, c))
                            if n * bn + jt * 8 + acc_col(lane, c) > qi + delta:
                                s[jt * 4 + c] = T.float32(NEG_BIG)
                for hf in T.unroll(2):
                    mx: T.float32 = m_run[hf]
                    for jt in T.unroll(bn // 8):
                        for e in T.unroll(2):
                            mx = T.max(mx, s[jt * 4 + 2 * hf + e])
                    mx = T.cuda.warp_max(mx, width=4)
                    # a row with every logit masked so far keeps p = 0 (2^(-3e38 - 0))
                    m_use: T.float32 = T.Select(mx == T.float32(NEG_BIG), T.float32(0), mx)
                    alpha[hf] = T.exp2(m_run[hf] - m_use)
                    rs: T.float32 = T.float32(0)
                    for jt in T.unroll(bn // 8):
                        for e in T.unroll(2):
                            p: T.float32 = T.exp2(s[jt * 4 + 2 * hf + e] - m_use)
                            p_new[jt * 4 + 2 * hf + e] = T.Cast("bfloat16", p)
                            rs = rs + p
                    l_run[hf] = l_run[hf] * alpha[hf] + rs
                    m_run[hf] = mx

            @T.inline
            def rescale_o():
                # P(j-1) V(j-1) has landed: this multiply is the first use of each O register after the wait
                for jt in T.unroll(d // 8):
                    for c in T.unroll(4):
                        T.ptx.mul.f32(o[jt * 4 + c], o[jt * 4 + c], alpha[c // 2])

            # this CTA's (sequence, query tile): tiles of a sequence are numbered from its last one
            seq: T.int32 = -1
            mblk: T.int32 = 0
            rem: T.int32 = bid // hq
            for b in T.serial(batch):
                ntb: T.int32 = (QO[b + 1] - QO[b] + BM - 1) // BM
                if seq < 0:
                    if rem < ntb:
                        seq = b
                        mblk = ntb - 1 - rem
                    else:
                        rem = rem - ntb
            if seq >= 0:
                q0: T.int32 = QO[seq]
                lq: T.int32 = QO[seq + 1] - q0
                kv0: T.int32 = KVP[seq]
                lk: T.int32 = KVP[seq + 1] - kv0
                if page > 1:
                    lk = (KVP[seq + 1] - kv0 - 1) * page + LAST[seq]
                m0: T.int32 = mblk * BM
                nrows: T.int32 = T.min(lq - m0, BM)
                delta: T.int32 = lk - lq  # query i sees KV tokens j <= i + delta
                ntile: T.int32 = (m0 + nrows + delta + bn - 1) // bn
                # descriptors of buffer 0; buffer b is b tiles further (the start address field adds)
                T.cuda.wgmma.encode_matrix_descriptor(
                    T.address_of(desc[0]), sq.ptr_to([wg * WG_ROWS * 64]), 1, sbo, SWIZZLE_128B
                )
                T.cuda.wgmma.encode_matrix_descriptor(T.address_of(desc[1]), sk.ptr_to([0, 0]), 1, sbo, SWIZZLE_128B)
                T.cuda.wgmma.encode_matrix_descriptor(
                    T.address_of(desc[2]), sv.ptr_to([0, 0]), v_lbo, sbo, SWIZZLE_128B
                )
                for j in T.unroll(K_AHEAD + 1):
                    fetch_row(j, kv0, lk, ntile)
                    store_row(j, ntile)
                T.cuda.cta_sync()
                # groups: {Q, K(0)}, {K(1)}, and {V(0)} when V runs two tiles ahead
                for i in T.unroll(q_loads):
                    r = T.meta_var(copy_row(tx, i, row_step, chunks))
                    T.ptx.cp.async_.cg.shared.global_(
                        sq.ptr_to([panel_chunk(r, cc, BM) * 8]), Q.ptr_to([q0 + T.min(m0 + r, lq - 1), h, cc * 8]), 16
                    )
                copy_tile(sk, K, 0, K_RING, ntile)
                copy_tile(sk, K, 1, K_RING, ntile)
                if va == 2:
                    copy_tile(sv, V, 0, v_ring, ntile)
                for hf in T.unroll(2):
                    m_run[hf] = T.float32(NEG_BIG)
                    l_run[hf] = T.float32(0)
                for i in T.unroll(o_regs):
                    o[i] = T.float32(0)
                for i in T.unroll(s_regs):
                    s[i] = T.float32(0)  # defined inputs for the first S product (which ignores them)
                # walk tile 0: S(0), then the copies of V(v_ahead - 1) and K(2) run under its softmax
                publish(va)
                T.ptx.wgmma.fence.sync.aligned()
                issue_s(0)
                refill(0, kv0, lk, ntile)
                T.ptx.wgmma.wait_group.sync.aligned(0)
                softmax(0, m0, delta, ntile)
                store_row(K_AHEAD + 1, ntile)
                for j in T.serial(1, ntile):
                    for i in T.unroll(s_regs):
                        p_cur[i] = p_new[i]
                    # K(j) and V(j-1) landed; every warpgroup is done with K(j-1), V(j-2) and row list j-1
                    publish(va)
                    T.ptx.wgmma.fence.sync.aligned()
                    issue_s(j)
                    issue_pv(j - 1)
                    refill(j, kv0, lk, ntile)
                    T.ptx.wgmma.wait_group.sync.aligned(1)
                    softmax(j, m0, delta, ntile)
                    T.ptx.wgmma.wait_group.sync.aligned(0)
                    rescale_o()
                    store_row(j + K_AHEAD + 1, ntile)
                # the last product: P(ntile-1) V(ntile-1)
                for i in T.unroll(s_regs):
                    p_cur[i] = p_new[i]
                publish(0)
                T.ptx.wgmma.fence.sync.aligned()
                issue_pv(ntile - 1)
                T.ptx.wgmma.wait_group.sync.aligned(0)
                # epilogue: each warpgroup writes only its own 64 rows of sq, which only its own wgmma read
                for hf in T.unroll(2):
                    row = T.meta_var(wg * WG_ROWS + warp * 16 + acc_row(lane, 2 * hf))
                    total: T.float32 = T.cuda.warp_sum(l_run[hf], width=4)
                    alpha[hf] = T.float32(1) / total
                    if lane % 4 == 0 and row < nrows:
                        LSE[q0 + m0 + row, h] = m_run[hf] + T.log2(total)
                rescale_o()
                for jt in T.unroll(d // 8):
                    for c in T.unroll(4):
                        row = T.meta_var(wg * WG_ROWS + warp * 16 + acc_row(lane, c))
                        sq[panel_chunk(row, jt, BM) * 8 + acc_col(lane, c)] = T.Cast("bfloat16", o[jt * 4 + c])
                T.cuda.cta_sync()
                for i in T.unroll(q_loads):
                    r = T.meta_var(copy_row(tx, i, row_step, chunks))
                    if r < nrows:
                        for e in T.vectorized(8):
                            OUT[q0 + m0 + r, h, cc * 8 + e] = sq[panel_chunk(r, cc, BM) * 8 + e]

        mod = tvm.IRModule({"main": prefill})
        return tvm.compile(mod, target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")
