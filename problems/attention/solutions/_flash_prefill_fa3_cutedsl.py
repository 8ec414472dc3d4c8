"""CuTe DSL sm_90a causal prefill, plan `fa3`: FlashAttention-3's CTA structure around plan `wgmmalean`'s math
(`_flash_prefill_wgmmalean_cutedsl.py`: the same tiles, MMAs, online softmax and epilogue), instantiated by the
p04-p09 `NN_fa3_cutedsl.py` solutions.

Plans `wgmma*` have every thread copy K/V and meet at one CTA barrier per KV tile, so both warpgroups stall
together on the slowest copy and issue their MMAs at the same time. Here a CTA is three warpgroups:

- warpgroup 0, the producer (`setmaxnreg` down to PRODUCER_REGS): copies Q, then K(j) and V(j) of every walk tile
  j with 16-byte cp.async through the page table (ragged and page-64 rows are not one box a TMA could fetch
  for page size 1, so all plans gather by row), into rings of `k_stages` K and `v_stages` V buffers. Each
  buffer has a `full` mbarrier (128 arrivals: every producer thread's `cp.async.mbarrier.arrive.noinc`, which
  fires once that thread's earlier copies landed; K(0)'s also covers Q, copied before it) and an `empty`
  mbarrier (8 arrivals: lane 0 of every consumer warp once its wgmma reading the buffer retired). The producer
  waits for `empty` before refilling a buffer; nothing else synchronises the CTA after the barriers' init.
- warpgroups 1 and 2, the consumers (`setmaxnreg` up to CONSUMER_REGS), 64 query rows each: plan `wgmmalean`'s
  tile loop (S(j) and P(j-1)·V(j-1) issued together, the softmax of S(j) under P(j-1)·V(j-1)), waiting on
  `full` (then `fence.proxy.async`: the generic-proxy copies become visible to the wgmma's async proxy) and
  releasing a buffer with `empty` as soon as its product retired: K(j) after S(j), V(j-1) after P(j-1)·V(j-1).
- ping-pong: a consumer issues a tile's MMAs only on its turn (named barrier SCHED[c], 256 threads: its own 128
  sync, the other consumer's 128 arrive after issuing theirs), so the tensor cores run one warpgroup's
  products while the other warpgroup runs its softmax. Consumer 1 opens with an arrive on consumer 0's
  barrier and skips the arrive after its last issue, so every arrive meets a sync and no barrier is left
  half-full when the CTA exits.

Phases: walk tile j uses buffer j % stages; its `full` completes phase j // stages, which a consumer waits for
with parity (j // stages) % 2; the producer's refill waits for `empty` phase j // stages - 1, parity
(j // stages + 1) % 2 (phase -1 counts as done, so the first round passes). A parity wait is ambiguous only two
phases ahead, which the rings rule out: the producer cannot refill a buffer before both consumers released it.
"""

from typing import Any

import cutlass
import cutlass.cute as cute
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.memory.smem import SmemAllocator

from problems.attention.solutions import _flash_prefill_wgmma_cutedsl as FWC
from problems.attention.solutions import _flash_prefill_wgmmalean_cutedsl as FWL
from problems.attention.solutions._flash_prefill import NEG_BIG, acc_col, acc_row, copy_row, kv_row
from problems.attention.solutions._flash_prefill_sm90 import BM, WG_ROWS, Sm90Tiling, panel_chunk

WG_THREADS = FWC.WG_THREADS
CTA_THREADS = 3 * WG_THREADS  # producer + two consumers
CONSUMER_THREADS = 2 * WG_THREADS
# 128·56 + 256·224 = 64512 registers, the 384-thread CTA's 168 each. The producer holds one tile's 16 row indices
# and addresses: at 40 registers it spills at page size 64 (the page and slot of each row); the consumers' SASS
# uses up to R221 (plan wgmmalean's loop)
PRODUCER_REGS = 56
CONSUMER_REGS = 224
SCHED = (1, 2)  # named barriers: consumer c's turn to issue MMAs (0 is the CTA barrier)
EPILOGUE = 3  # named barrier of the 256 consumer threads around the output tile in shared memory
CONSUMER_WARPS = CONSUMER_THREADS // 32  # arrivals on an `empty` barrier


def chunks_of(ptr: Any, elements: int) -> Any:
    """The flat 16-byte chunk view ((8,), (chunks,)) of ``elements`` bf16 at ``ptr`` that copies address."""
    return cute.zipped_divide(cute.make_tensor(ptr, cute.make_layout((elements,))), (8,))


class FlashPrefillFa3(FWL.FlashPrefillWgmmaLean):
    """Plan `fa3` for one `Sm90Tiling`: rings of ``k_stages`` K and ``v_stages`` V tiles filled by a producer
    warpgroup; ``__call__`` as `FlashPrefillWgmma`'s."""

    def __init__(self, tiling: Sm90Tiling, k_stages: int, v_stages: int) -> None:
        if k_stages < 2 or v_stages < 2:
            raise ValueError(f"a ring needs two buffers to overlap copies: k_stages={k_stages} v_stages={v_stages}")
        self.t, self.k_ring, self.v_ring = tiling, k_stages, v_stages
        if self.smem_bytes > FWC.SMEM_LIMIT:
            raise ValueError(f"{self.smem_bytes} bytes of shared memory exceed the {FWC.SMEM_LIMIT} a CTA may have")
        self._kernel: list = []

    @property
    def barriers(self) -> int:
        """mbarriers: full and empty of every K and V buffer."""
        return 2 * (self.k_ring + self.v_ring)

    @property
    def smem_bytes(self) -> int:
        """Q tile, K and V rings (bf16, 1024-byte aligned), the mbarriers (8 bytes each, 1024-byte aligned)."""
        t = self.t
        return (BM + (self.k_ring + self.v_ring) * t.bn) * t.d * 2 + 1024

    def storage(self) -> Any:
        """Shared memory: Q tile, K ring, V ring (1024-byte aligned for the swizzle), the mbarriers."""
        t, k_ring, v_ring, nbar = self.t, self.k_ring, self.v_ring, self.barriers

        @cute.struct
        class Storage:
            sq: cute.struct.Align[cute.struct.MemRange[cutlass.BFloat16, BM * t.d], 1024]
            sk: cute.struct.Align[cute.struct.MemRange[cutlass.BFloat16, k_ring * t.bn * t.d], 1024]
            sv: cute.struct.Align[cute.struct.MemRange[cutlass.BFloat16, v_ring * t.bn * t.d], 1024]
            bars: cute.struct.Align[cute.struct.MemRange[cutlass.Int64, nbar], 1024]

        return Storage

    # --- device code -------------------------------------------------------------------------------
    @cute.jit
    def softmax(self, acc, m_run, l_run, alpha, scale2, n, q_row0, delta, lane):
        # plan wgmmalean's softmax (one branch per mask case) at head dim 128; at 256 its two exponentiate copies
        # inside the consumers' branch make ptxas serialise every wgmma (C7520, "compiler-inserted WG.AR in
        # divergent path"), so plan wgmmapipe's single-block softmax, whose wait for P(j-1)·V(j-1) ptxas hoists
        # above the exponentials: the other consumer's products keep the tensor cores busy meanwhile
        if cutlass.const_expr(self.t.d == 128):
            FWL.FlashPrefillWgmmaLean.softmax(self, acc, m_run, l_run, alpha, scale2, n, q_row0, delta, lane)
        else:
            FWC.FlashPrefillWgmma.softmax(self, acc, m_run, l_run, alpha, scale2, n, q_row0, delta, lane)

    @cute.jit
    def walk(self, mQO: cute.Tensor, mKVP: cute.Tensor, mLast: cute.Tensor, seq, mblk):
        """(q0, lq, kv0, lk, m0, nrows, delta, ntile) of query tile ``mblk`` of sequence ``seq``: its first query
        row, the sequence's query and KV lengths and first KV slot, the tile's first row and real rows, the causal
        offset (query i sees KV tokens j <= i + delta) and the KV tiles it walks."""
        bn, page = self.t.bn, self.t.page
        q0 = mQO[seq]
        lq = mQO[seq + 1] - q0
        kv0 = mKVP[seq]
        lk = mKVP[seq + 1] - kv0
        if cutlass.const_expr(page > 1):
            lk = (mKVP[seq + 1] - kv0 - 1) * page + mLast[seq]
        m0 = mblk * BM
        nrows = cutlass.min(lq - m0, BM)
        delta = lk - lq
        ntile = (m0 + nrows + delta + bn - 1) // bn
        return q0, lq, kv0, lk, m0, nrows, delta, ntile

    @cute.jit
    def produce(self, atom, s_dst, ring: int, bars, g_src, rows, kvh, j):
        # walk tile j's K or V rows into buffer j % ring once both consumers released its previous tile; the
        # buffer's `full` fires when this thread's copies (and all before them) landed
        t = self.t
        ptid, _, _ = cute.arch.thread_idx()
        cc = ptid % t.chunks
        slot = j % ring
        cute.arch.mbarrier_wait(bars + ring + slot, (j // ring + 1) % 2)
        for i in cutlass.range_constexpr(len(rows)):
            r = copy_row(ptid, i, WG_THREADS // t.chunks, t.chunks)
            dst = slot * t.bn * t.chunks + panel_chunk(r, cc, t.bn)
            cute.copy(atom, g_src[(0, 0, None), (rows[i], kvh, cc)], s_dst[(None,), (dst,)])
        cute.arch.cp_async_mbarrier_arrive_noinc(bars + slot)

    @cute.jit
    def acquire(self, bars, ring: int, j):
        # walk tile j's buffer landed (its `full` phase j // ring); make it visible to the wgmma's async proxy
        cute.arch.mbarrier_wait(bars + j % ring, j // ring % 2)
        cute.arch.fence_proxy("async.shared", space="cta")

    @cute.jit
    def release(self, bars, ring: int, j, lane):
        # this warp's wgmma reading walk tile j's buffer retired
        if lane == 0:
            cute.arch.mbarrier_arrive(bars + ring + j % ring)

    @cute.kernel
    def kernel(
        self,
        mQ: cute.Tensor,
        mK: cute.Tensor,
        mV: cute.Tensor,
        mQO: cute.Tensor,
        mKVP: cute.Tensor,
        mTable: cute.Tensor,
        mLast: cute.Tensor,
        mO: cute.Tensor,
        mLse: cute.Tensor,
        scale2: cutlass.Float32,
        q_layout: cute.ComposedLayout,
        k_layout: cute.ComposedLayout,
        v_layout: cute.ComposedLayout,
    ):
        t = self.t
        hq, d, page, bn, chunks = t.hq, t.d, t.page, t.bn, t.chunks
        kr, vr = self.k_ring, self.v_ring
        tidx, _, _ = cute.arch.thread_idx()
        bid, _, _ = cute.arch.block_idx()
        h = bid % hq
        kvh = h // t.group
        wg = cute.arch.make_warp_uniform(tidx // WG_THREADS)
        lane = tidx % 32

        storage = SmemAllocator().allocate(self.storage())
        k_bars = storage.bars.data_ptr()  # K full [0, kr), K empty [kr, 2 kr), then V's likewise
        v_bars = k_bars + 2 * kr
        if tidx == 0:
            for i in cutlass.range_constexpr(kr):
                cute.arch.mbarrier_init(k_bars + i, WG_THREADS)
                cute.arch.mbarrier_init(k_bars + kr + i, CONSUMER_WARPS)
            for i in cutlass.range_constexpr(vr):
                cute.arch.mbarrier_init(v_bars + i, WG_THREADS)
                cute.arch.mbarrier_init(v_bars + vr + i, CONSUMER_WARPS)
            cute.arch.mbarrier_init_fence()
        cute.arch.sync_threads()

        sQc = chunks_of(storage.sq.data_ptr(), BM * d)
        seq, mblk = self.cta_tile(mQO, bid // hq)
        if wg == 0:
            cute.arch.setmaxregister_decrease(PRODUCER_REGS)
            if seq >= 0:
                q0, lq, kv0, lk, m0, nrows, delta, ntile = self.walk(mQO, mKVP, mLast, seq, mblk)
                sKc = chunks_of(storage.sk.data_ptr(), kr * bn * d)
                sVc = chunks_of(storage.sv.data_ptr(), vr * bn * d)
                g2s = cute.make_copy_atom(
                    cpasync.CopyG2SOp(cache_mode=cpasync.LoadCacheMode.GLOBAL), cutlass.BFloat16, num_bits_per_copy=128
                )
                gQ = cute.zipped_divide(mQ, (1, 1, 8))
                gK = cute.zipped_divide(mK, (1, 1, 8))
                gV = cute.zipped_divide(mV, (1, 1, 8))
                step = WG_THREADS // chunks  # rows one pass of the producer's copies covers
                cc = tidx % chunks
                for i in cutlass.range_constexpr(BM // step):
                    r = copy_row(tidx, i, step, chunks)
                    cute.copy(
                        g2s,
                        gQ[(0, 0, None), (q0 + cutlass.min(m0 + r, lq - 1), h, cc)],
                        sQc[(None,), (panel_chunk(r, cc, BM),)],
                    )
                for j in cutlass.range(ntile, unroll=1):
                    # pool rows of walk tile j (KV tile ntile - 1 - j; rows past the end re-read the last token)
                    base = (ntile - 1 - j) * bn
                    rows = [
                        kv_row(mTable, kv0, cutlass.min(base + copy_row(tidx, i, step, chunks), lk - 1), page)
                        for i in range(bn // step)
                    ]
                    self.produce(g2s, sKc, kr, k_bars, gK, rows, kvh, j)
                    self.produce(g2s, sVc, vr, v_bars, gV, rows, kvh, j)
                # the copies land before this thread exits (the consumers wait for them anyway)
                cute.arch.cp_async_commit_group()
                cute.arch.cp_async_wait_group(0)
        else:
            cute.arch.setmaxregister_increase(CONSUMER_REGS)
            if seq >= 0:
                q0, lq, kv0, lk, m0, nrows, delta, ntile = self.walk(mQO, mKVP, mLast, seq, mblk)
                self.consume(
                    storage, sQc, k_bars, v_bars, mO, mLse, scale2, q_layout, k_layout, v_layout,
                    wg - 1, h, q0, m0, nrows, delta, ntile, lane,
                )  # fmt: skip

    @cute.jit
    def consume(
        self, storage, sQc, k_bars, v_bars, mO, mLse, scale2, q_layout, k_layout, v_layout,
        c, h, q0, m0, nrows, delta, ntile, lane,
    ):  # fmt: skip
        # consumer c (0 or 1): query rows 64 c .. 64 c + 63 of the tile, plan wgmmalean's loop under the ping-pong
        t = self.t
        d, bn, chunks, kr, vr = t.d, t.bn, t.chunks, self.k_ring, self.v_ring
        o_regs = t.o_regs
        tidx, _, _ = cute.arch.thread_idx()
        ctid = tidx - WG_THREADS  # 0 .. 255 over both consumers
        warp = ctid % WG_THREADS // 32
        cc = ctid % chunks
        mine, other = cutlass.Int32(SCHED[0]) + c, cutlass.Int32(SCHED[1]) - c
        mma_qk, mma_pv = FWC.tiled_mmas(t)
        sQf = cute.make_tensor(storage.sq.data_ptr(), cute.make_layout((BM * d,)))
        sQ = storage.sq.get_tensor(q_layout.outer, swizzle=q_layout.inner)
        sK = storage.sk.get_tensor(k_layout.outer, swizzle=k_layout.inner)
        sVt = FWC.transposed(storage.sv.get_tensor(v_layout.outer, swizzle=v_layout.inner), t, vr)
        gO = cute.zipped_divide(mO, (1, 1, 8))

        wg_slice = cute.make_layout(2, stride=WG_THREADS)(c)
        thr_qk = mma_qk.get_slice(wg_slice)
        thr_pv = mma_pv.get_slice(wg_slice)
        tSrQ = mma_qk.make_fragment_A(thr_qk.partition_A(sQ))
        tSrK = mma_qk.make_fragment_B(thr_qk.partition_B(sK))
        tOrVt = mma_pv.make_fragment_B(thr_pv.partition_B(sVt))
        acc_s = cute.make_rmem_tensor(thr_qk.partition_shape_C((BM, bn)), cutlass.Float32)
        acc_o = cute.make_rmem_tensor(thr_pv.partition_shape_C((BM, d)), cutlass.Float32)
        r_p = cute.make_rmem_tensor(thr_pv.partition_shape_A((BM, bn)), cutlass.BFloat16)
        p_view = cute.make_tensor(acc_s.iterator, r_p.layout)
        m_run = cute.make_rmem_tensor((2,), cutlass.Float32)
        l_run = cute.make_rmem_tensor((2,), cutlass.Float32)
        alpha = cute.make_rmem_tensor((2,), cutlass.Float32)
        out8 = cute.make_rmem_tensor((8,), cutlass.BFloat16)
        row0 = c * WG_ROWS + warp * 16  # first tile row of this thread's warp
        m_run.fill(NEG_BIG)
        l_run.fill(0.0)
        acc_o.fill(0.0)
        if c == 1:
            cute.arch.barrier_arrive(barrier_id=SCHED[0], number_of_threads=CONSUMER_THREADS)

        # walk tile 0: S(0) (its `full` covers Q too)
        self.acquire(k_bars, kr, 0)
        cute.arch.barrier(barrier_id=mine, number_of_threads=CONSUMER_THREADS)
        warpgroup.fence()
        self.issue_s(acc_s, tSrQ, tSrK, 0, kr)
        cute.arch.barrier_arrive(barrier_id=other, number_of_threads=CONSUMER_THREADS)
        warpgroup.wait_group(0)
        self.release(k_bars, kr, 0, lane)
        self.softmax(acc_s, m_run, l_run, alpha, scale2, ntile - 1, m0 + row0, delta, lane)
        r_p.store(p_view.load().to(cutlass.BFloat16))
        for j in cutlass.range(1, ntile, unroll=1):
            self.acquire(k_bars, kr, j)
            self.acquire(v_bars, vr, j - 1)
            cute.arch.barrier(barrier_id=mine, number_of_threads=CONSUMER_THREADS)
            warpgroup.fence()
            self.issue_s(acc_s, tSrQ, tSrK, j, kr)
            self.issue_pv(acc_o, r_p, tOrVt, j - 1, vr)
            cute.arch.barrier_arrive(barrier_id=other, number_of_threads=CONSUMER_THREADS)
            warpgroup.wait_group(1)  # S(j) landed; P(j-1)·V(j-1) may still run
            self.release(k_bars, kr, j, lane)
            self.softmax(acc_s, m_run, l_run, alpha, scale2, ntile - 1 - j, m0 + row0, delta, lane)
            warpgroup.wait_group(0)  # P(j-1)·V(j-1) landed: O and the A operand are free
            self.release(v_bars, vr, j - 1, lane)
            for i in cutlass.range_constexpr(o_regs):
                acc_o[i] = acc_o[i] * alpha[i % 4 // 2]
            r_p.store(p_view.load().to(cutlass.BFloat16))
        # the last product: P(ntile-1)·V(ntile-1); consumer 1 issues last, so nobody waits for its arrive
        self.acquire(v_bars, vr, ntile - 1)
        cute.arch.barrier(barrier_id=mine, number_of_threads=CONSUMER_THREADS)
        warpgroup.fence()
        self.issue_pv(acc_o, r_p, tOrVt, ntile - 1, vr)
        if c == 0:
            cute.arch.barrier_arrive(barrier_id=other, number_of_threads=CONSUMER_THREADS)
        warpgroup.wait_group(0)
        self.release(v_bars, vr, ntile - 1, lane)

        # epilogue: each consumer writes only its own 64 rows of sQ, which only its own wgmma read
        for hf in cutlass.range_constexpr(2):
            total = cute.arch.warp_reduction_sum(l_run[hf], threads_in_group=4)
            alpha[hf] = cutlass.Float32(1.0) / total
            row = row0 + acc_row(lane, 2 * hf)
            if lane % 4 == 0:  # noqa: SIM102 (dynamic conditions, one per if)
                if row < nrows:
                    mLse[q0 + m0 + row, h] = m_run[hf] + cute.math.log2(total)
        for jt in cutlass.range_constexpr(d // 8):
            for e in cutlass.range_constexpr(4):
                row = row0 + acc_row(lane, e)
                sQf[panel_chunk(row, jt, BM) * 8 + acc_col(lane, e)] = (acc_o[jt * 4 + e] * alpha[e // 2]).to(
                    cutlass.BFloat16
                )
        cute.arch.barrier(barrier_id=EPILOGUE, number_of_threads=CONSUMER_THREADS)
        for i in cutlass.range_constexpr(t.q_loads):
            r = copy_row(ctid, i, t.row_step, chunks)
            if r < nrows:
                cute.autovec_copy(sQc[(None,), (panel_chunk(r, cc, BM),)], out8)
                cute.autovec_copy(out8, gO[(0, 0, None), (q0 + m0 + r, h, cc)])

    # --- host code ---------------------------------------------------------------------------------
    @cute.jit
    def launch(
        self,
        mQ: cute.Tensor,
        mK: cute.Tensor,
        mV: cute.Tensor,
        mQO: cute.Tensor,
        mKVP: cute.Tensor,
        mTable: cute.Tensor,
        mLast: cute.Tensor,
        mO: cute.Tensor,
        mLse: cute.Tensor,
        scale2: cutlass.Float32,
    ):
        q_layout, k_layout, v_layout = FWC.smem_layouts(self.t, self.k_ring, self.v_ring)
        total_q = cute.size(mQ, mode=[0])
        batch = cute.size(mQO, mode=[0]) - 1
        tiles = (total_q + BM - 1) // BM + batch
        self.kernel(mQ, mK, mV, mQO, mKVP, mTable, mLast, mO, mLse, scale2, q_layout, k_layout, v_layout).launch(
            grid=[tiles * self.t.hq, 1, 1], block=[CTA_THREADS, 1, 1]
        )
