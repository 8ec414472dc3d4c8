"""TIRx sm_90a causal prefill, plan `fa3`: FlashAttention-3's CTA structure around plan `wgmmapipe`'s tiles, MMAs,
softmax and epilogue (`_flash_prefill_wgmma_tirx.py`), instantiated by the p04-p09 `NN_fa3_tirx.py` solutions. The
CuTe DSL twin is `_flash_prefill_fa3_cutedsl.py`; the protocol (barriers, parities, counts, turns) is the same.

Plans `wgmma*` have every thread copy K/V and meet at one CTA barrier per KV tile, so both warpgroups stall
together on the slowest copy and issue their MMAs at the same time. Here a CTA is three warpgroups:

- warpgroup 0, the producer (`setmaxnreg.dec`, REGS_BY_HEAD_DIM): copies Q, then K(j) and V(j) of every walk tile j
  with 16-byte cp.async through the page table, into rings of `k_stages` K and `v_stages` V buffers. Each buffer
  has a `full` mbarrier (128 arrivals: every producer thread's `cp.async.mbarrier.arrive.noinc`, which fires once
  that thread's earlier copies landed; K(0)'s also covers Q, copied before it) and an `empty` mbarrier (8
  arrivals: lane 0 of every consumer warp once its wgmma reading the buffer retired). The producer waits for
  `empty` before refilling a buffer; nothing else synchronises the CTA after the barriers' init.
- warpgroups 1 and 2, the consumers (`setmaxnreg.inc`), 64 query rows each: plan `wgmma`'s tile loop (S(j) and
  P(j-1)·V(j-1) issued together, the softmax of S(j) after S(j) alone retired, one branch per mask case so ptxas
  keeps its exponentials before the wait for P(j-1)·V(j-1): plan `wgmmalean`'s finding), waiting on `full`
  (then `fence.proxy.async`: the copies become visible to the async proxy wgmma reads through) and releasing a
  buffer on `empty` as soon as its product retired: K(j) after S(j), V(j-1) after P(j-1)·V(j-1).
- ping-pong: a consumer issues a tile's MMAs only on its turn (named barrier SCHED[c], 256 threads: its own 128
  sync, the other consumer's 128 arrive after issuing theirs), so the tensor cores run one warpgroup's products
  while the other runs its softmax. Consumer 1 opens with an arrive on consumer 0's barrier and skips the
  arrive after its last issue, so every arrive meets a sync and no barrier is left half-full when the CTA exits.

Phases: walk tile j uses buffer j % stages; its `full` completes phase j // stages, which a consumer waits for with
parity (j // stages) % 2; the producer's refill waits for `empty` phase j // stages - 1, parity
(j // stages + 1) % 2 (phase -1 counts as done, so the first round passes). A parity wait is ambiguous only two
phases ahead, which the rings rule out: the producer cannot refill a buffer before both consumers released it.

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
    WG_ROWS,
    Sm90Tiling,
    k_major_step,
    mn_major_step,
    panel_bytes,
    panel_chunk,
)
from problems.attention.solutions._flash_prefill_wgmma_tirx import WGMMA_BF16, FlashPrefillSm90

WG_THREADS = 128
CTA_THREADS = 3 * WG_THREADS  # producer + two consumers
CONSUMER_THREADS = 2 * WG_THREADS
CONSUMER_WARPS = CONSUMER_THREADS // 32  # arrivals on an `empty` barrier
# setmaxnreg's (producer, consumer) registers by head dim: 128·p + 256·c = 64512, the 384-thread CTA's 168 each
# (ptxas's cap at __launch_bounds__(384)). At 128 the producer keeps 16 table-derived rows a tile (at 40 it spills at
# page size 64); at 256 the consumers hold a 64 x 256 fp32 O and spill at 224 (SASS: up to R229 at 232)
REGS_BY_HEAD_DIM = {128: (56, 224), 256: (40, 232)}
SCHED = (1, 2)  # named barriers: consumer c's turn to issue MMAs (0 is the CTA barrier)
EPILOGUE = 3  # named barrier of the 256 consumer threads around the output tile in shared memory
SMEM_LIMIT = 232448  # bytes of shared memory one CTA may opt into on sm_90 (227 KB)


def producer_step(t: Sm90Tiling) -> int:
    """Tile rows one pass of the producer's 16-byte copies covers (a thread copies one chunk a row)."""
    return WG_THREADS // t.chunks


class FlashPrefillFa3(FlashPrefillSm90):
    """Plan `fa3` for one `Sm90Tiling`: rings of ``k_stages`` K and ``v_stages`` V tiles filled by a producer
    warpgroup (`shape_key` and ``__call__`` as `FlashPrefillSm90`'s)."""

    def __init__(self, tiling: Sm90Tiling, k_stages: int, v_stages: int) -> None:
        if k_stages < 2 or v_stages < 2:
            raise ValueError(f"a ring needs two buffers to overlap copies: k_stages={k_stages} v_stages={v_stages}")
        super().__init__(tiling)
        self.k_ring, self.v_ring = k_stages, v_stages
        need, limit = self.smem_bytes, SMEM_LIMIT  # (a module constant in an f-string would not bundle)
        if need > limit:
            raise ValueError(f"{need} bytes of shared memory exceed the {limit} a CTA may have")

    @property
    def barriers(self) -> int:
        """mbarriers: full and empty of every K and V buffer."""
        return 2 * (self.k_ring + self.v_ring)

    @property
    def smem_bytes(self) -> int:
        """Q tile, K and V rings (bf16), the mbarriers (8 bytes each)."""
        t = self.t
        return (BM + (self.k_ring + self.v_ring) * t.bn) * t.d * 2 + 8 * self.barriers

    def build(self, total_q: int, kv_rows: int, batch: int, n_table: int, n_last: int) -> tvm.runtime.Module:
        t = self.t
        hq, hkv, group, d, page, bn = t.hq, t.hkv, t.group, t.d, t.page, t.bn
        chunks, s_regs, o_regs = t.chunks, t.s_regs, t.o_regs
        kr, vr = self.k_ring, self.v_ring
        step = producer_step(t)
        producer_regs, consumer_regs = REGS_BY_HEAD_DIM[d]
        p_rows = bn // step  # K/V rows a producer thread copies per tile
        p_q = BM // step  # Q rows a producer thread copies
        k_full, k_empty, v_full, v_empty = 0, kr, 2 * kr, 2 * kr + vr  # first mbarrier of each set
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
            tx = T.thread_id([CTA_THREADS])
            pool = T.SMEMPool()
            sq = pool.alloc((BM * d,), "bfloat16", align=1024)
            sk = pool.alloc((kr, bn * d), "bfloat16", align=1024)
            sv = pool.alloc((vr, bn * d), "bfloat16", align=1024)
            bars = pool.alloc((2 * (kr + vr),), "uint64", align=8)
            pool.commit()
            prow = T.alloc_local((p_rows,), "int32")  # producer: pool rows of its copies of the current tile
            s = T.alloc_local((s_regs,), "float32")  # consumers: S(j) of this thread's two rows
            o = T.alloc_local((o_regs,), "float32")
            p_cur = T.alloc_local((s_regs,), "bfloat16")  # P(j-1): the A operand in flight
            p_new = T.alloc_local((s_regs,), "bfloat16")  # P(j)
            p_cur_w = p_cur.view("uint32")
            m_run = T.alloc_local((2,), "float32")
            l_run = T.alloc_local((2,), "float32")
            alpha = T.alloc_local((2,), "float32")
            desc = T.alloc_local((3,), "uint64")  # Q (this consumer's rows), K(0) buffer, V(0) buffer
            h = T.meta_var(bid % hq)
            kvh = T.meta_var(bid % hq // group)
            wg = T.meta_var(tx // WG_THREADS)  # 0: the producer; 1, 2: consumers 0, 1
            c = T.meta_var(tx // WG_THREADS - 1)
            ctid = T.meta_var(tx - WG_THREADS)  # 0 .. 255 over both consumers
            warp = T.meta_var(tx % WG_THREADS // 32)  # warp of the warpgroup: its 16 rows of the m64 tile
            lane = T.meta_var(tx % 32)
            cc = T.meta_var(tx % chunks)  # the 16-byte chunk a producer thread copies in every row
            cc_out = T.meta_var(ctid % chunks)  # the 16-byte chunk a consumer thread stores in every output row

            @T.inline
            def produce(dst, src, ring, full, empty, j):
                # walk tile j's K or V rows into buffer j % ring once both consumers released its previous tile;
                # the buffer's `full` fires when this thread's copies (and all before them) landed
                T.cuda.mbarrier_wait(bars.ptr_to([empty + j % ring]), (j // ring + 1) % 2)
                for i in T.unroll(p_rows):
                    r = T.meta_var(copy_row(tx, i, step, chunks))
                    T.ptx.cp.async_.cg.shared.global_(
                        dst.ptr_to([j % ring, panel_chunk(r, cc, bn) * 8]),
                        src.ptr_to([prow[i], kvh, cc * 8]),
                        16,
                    )
                T.ptx.cp.async_.mbarrier.arrive.noinc.shared.b64(bars.ptr_to([full + j % ring]))

            @T.inline
            def acquire(full, ring, j):
                # walk tile j's buffer landed (its `full` phase j // ring); hand it to the async proxy
                T.cuda.mbarrier_wait(bars.ptr_to([full + j % ring]), j // ring % 2)
                T.ptx.fence.proxy.async_.shared__cta()

            @T.inline
            def release(empty, ring, j):
                # this warp's wgmma reading walk tile j's buffer retired
                if lane == 0:
                    T.ptx.mbarrier.arrive.shared.b64(bars.ptr_to([empty + j % ring]), T.uint32(1))

            @T.inline
            def my_turn():
                T.ptx.bar.sync(T.uint32(SCHED[0]) + T.Cast("uint32", c), T.uint32(CONSUMER_THREADS))

            @T.inline
            def pass_turn():
                T.ptx.bar.arrive(T.uint32(SCHED[1]) - T.Cast("uint32", c), T.uint32(CONSUMER_THREADS))

            @T.inline
            def issue_s(j):
                for kk in T.unroll(k_steps):
                    mma_s(
                        *[s[i] for i in range(s_regs)],
                        desc[0] + T.uint64(k_major_step(kk, BM) >> 4),
                        desc[1] + T.uint64((j % kr * tile_bytes + k_major_step(kk, bn)) >> 4),
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
                        desc[2] + T.uint64((j % vr * tile_bytes + mn_major_step(kk)) >> 4),
                        True, 1, 1, 1,
                    )  # fmt: skip
                T.ptx.wgmma.commit_group.sync.aligned()

            @T.inline
            def mask(n, m0, delta):
                # logits of KV tile n past a row's causal limit become -3e38
                for jt in T.unroll(bn // 8):
                    for e in T.unroll(4):
                        qi = T.meta_var(m0 + c * WG_ROWS + warp * 16 + acc_row(lane, e))
                        if n * bn + jt * 8 + acc_col(lane, e) > qi + delta:
                            s[jt * 4 + e] = T.float32(NEG_BIG)

            @T.inline
            def exponentiate():
                # plan wgmma's online softmax of the scaled, masked S(j) into P(j) (bf16); alpha rescales O
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
            def softmax(j, m0, delta, ntile):
                # S(j) has landed: scale it (the first use of each register, after the wait), then one branch per
                # mask case, each ending in `exponentiate`: the caller's wait for P(j-1)·V(j-1) opens the join
                # block, so ptxas cannot hoist it above the exponentials (plan wgmmalean's finding)
                n = T.meta_var(ntile - 1 - j)
                for i in T.unroll(s_regs):
                    T.ptx.mul.f32(s[i], s[i], scale2)
                if (n + 1) * bn > m0 + delta + 1:  # the tile crosses the causal diagonal of the CTA's first row
                    mask(n, m0, delta)
                    exponentiate()
                else:
                    exponentiate()

            @T.inline
            def rescale_o():
                # P(j-1) V(j-1) has landed: this multiply is the first use of each O register after the wait
                for jt in T.unroll(d // 8):
                    for e in T.unroll(4):
                        T.ptx.mul.f32(o[jt * 4 + e], o[jt * 4 + e], alpha[e // 2])

            if tx == 0:
                for i in T.unroll(kr):
                    T.ptx.mbarrier.init.shared.b64(bars.ptr_to([k_full + i]), T.uint32(WG_THREADS))
                    T.ptx.mbarrier.init.shared.b64(bars.ptr_to([k_empty + i]), T.uint32(CONSUMER_WARPS))
                for i in T.unroll(vr):
                    T.ptx.mbarrier.init.shared.b64(bars.ptr_to([v_full + i]), T.uint32(WG_THREADS))
                    T.ptx.mbarrier.init.shared.b64(bars.ptr_to([v_empty + i]), T.uint32(CONSUMER_WARPS))
            T.cuda.cta_sync()
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
            if seq >= 0:  # the whole CTA, so every warpgroup below runs its setmaxnreg
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
                if wg == 0:
                    T.ptx.setmaxnreg.dec.sync.aligned.u32(producer_regs)
                    for i in T.unroll(p_q):
                        r = T.meta_var(copy_row(tx, i, step, chunks))
                        T.ptx.cp.async_.cg.shared.global_(
                            sq.ptr_to([panel_chunk(r, cc, BM) * 8]),
                            Q.ptr_to([q0 + T.min(m0 + r, lq - 1), h, cc * 8]),
                            16,
                        )
                    for j in T.serial(ntile):
                        # pool rows of walk tile j (KV tile ntile - 1 - j; rows past the end re-read the last token)
                        for i in T.unroll(p_rows):
                            token = T.meta_var((ntile - 1 - j) * bn + copy_row(tx, i, step, chunks))
                            prow[i] = kv_row(TABLE, kv0, T.min(token, lk - 1), page)
                        produce(sk, K, kr, k_full, k_empty, j)
                        produce(sv, V, vr, v_full, v_empty, j)
                    # the copies land before this thread exits (the consumers wait for them anyway)
                    T.ptx.cp.async_.commit_group()
                    T.ptx.cp.async_.wait_group(0)
                else:
                    T.ptx.setmaxnreg.inc.sync.aligned.u32(consumer_regs)
                    # descriptors of buffer 0; buffer b is b tiles further (the start address field adds)
                    T.cuda.wgmma.encode_matrix_descriptor(
                        T.address_of(desc[0]), sq.ptr_to([c * WG_ROWS * 64]), 1, sbo, SWIZZLE_128B
                    )
                    T.cuda.wgmma.encode_matrix_descriptor(
                        T.address_of(desc[1]), sk.ptr_to([0, 0]), 1, sbo, SWIZZLE_128B
                    )
                    T.cuda.wgmma.encode_matrix_descriptor(
                        T.address_of(desc[2]), sv.ptr_to([0, 0]), v_lbo, sbo, SWIZZLE_128B
                    )
                    for hf in T.unroll(2):
                        m_run[hf] = T.float32(NEG_BIG)
                        l_run[hf] = T.float32(0)
                    for i in T.unroll(o_regs):
                        o[i] = T.float32(0)
                    for i in T.unroll(s_regs):
                        s[i] = T.float32(0)  # defined inputs for the first S product (which ignores them)
                    if c == 1:
                        T.ptx.bar.arrive(T.uint32(SCHED[0]), T.uint32(CONSUMER_THREADS))
                    # walk tile 0: S(0) (its `full` covers Q too)
                    acquire(k_full, kr, 0)
                    my_turn()
                    T.ptx.wgmma.fence.sync.aligned()
                    issue_s(0)
                    pass_turn()
                    T.ptx.wgmma.wait_group.sync.aligned(0)
                    release(k_empty, kr, 0)
                    softmax(0, m0, delta, ntile)
                    for j in T.serial(1, ntile):
                        for i in T.unroll(s_regs):
                            p_cur[i] = p_new[i]
                        acquire(k_full, kr, j)
                        acquire(v_full, vr, j - 1)
                        my_turn()
                        T.ptx.wgmma.fence.sync.aligned()
                        issue_s(j)
                        issue_pv(j - 1)
                        pass_turn()
                        T.ptx.wgmma.wait_group.sync.aligned(1)  # S(j) landed; P(j-1)·V(j-1) may still run
                        release(k_empty, kr, j)
                        softmax(j, m0, delta, ntile)
                        T.ptx.wgmma.wait_group.sync.aligned(0)  # P(j-1)·V(j-1) landed
                        release(v_empty, vr, j - 1)
                        rescale_o()
                    # the last product: P(ntile-1)·V(ntile-1); consumer 1 issues last, so nobody waits for its arrive
                    for i in T.unroll(s_regs):
                        p_cur[i] = p_new[i]
                    acquire(v_full, vr, ntile - 1)
                    my_turn()
                    T.ptx.wgmma.fence.sync.aligned()
                    issue_pv(ntile - 1)
                    if c == 0:
                        pass_turn()
                    T.ptx.wgmma.wait_group.sync.aligned(0)
                    release(v_empty, vr, ntile - 1)
                    # epilogue: each consumer writes only its own 64 rows of sq, which only its own wgmma read
                    for hf in T.unroll(2):
                        row = T.meta_var(c * WG_ROWS + warp * 16 + acc_row(lane, 2 * hf))
                        total: T.float32 = T.cuda.warp_sum(l_run[hf], width=4)
                        alpha[hf] = T.float32(1) / total
                        if lane % 4 == 0 and row < nrows:
                            LSE[q0 + m0 + row, h] = m_run[hf] + T.log2(total)
                    rescale_o()
                    for jt in T.unroll(d // 8):
                        for e in T.unroll(4):
                            row = T.meta_var(c * WG_ROWS + warp * 16 + acc_row(lane, e))
                            sq[panel_chunk(row, jt, BM) * 8 + acc_col(lane, e)] = T.Cast("bfloat16", o[jt * 4 + e])
                    T.ptx.bar.sync(T.uint32(EPILOGUE), T.uint32(CONSUMER_THREADS))
                    for i in T.unroll(t.q_loads):  # Sm90Tiling's row_step / q_loads count 256 threads: the consumers
                        r = T.meta_var(copy_row(ctid, i, t.row_step, chunks))
                        if r < nrows:
                            for e in T.vectorized(8):
                                OUT[q0 + m0 + r, h, cc_out * 8 + e] = sq[panel_chunk(r, cc_out, BM) * 8 + e]

        mod = tvm.IRModule({"main": prefill})
        return tvm.compile(mod, target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")
