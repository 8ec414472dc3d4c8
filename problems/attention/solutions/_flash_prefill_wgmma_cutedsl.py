"""CuTe DSL sm_90a causal prefill template on WGMMA, instantiated by the p04-p09 `NN_wgmma_cutedsl.py` and
`NN_wgmmapipe_cutedsl.py` solutions.

The schedule of the TIRx template (`_flash_prefill_wgmma_tirx.py`: FlashAttention-3's consumer schedule,
without a producer warpgroup) with its index math (`_flash_prefill.py`, `_flash_prefill_sm90.py`), and the
operands handed to CuTe's warpgroup MMA atoms, which build the matrix descriptors from CuTe's own
shared-memory layouts (DESIGN §5: one kernel does all of the operator's work). A CTA of two warpgroups owns
one (sequence, query tile of 128 rows, query head), 64 rows a warpgroup; CTAs of one query tile's heads are
adjacent (a KV head's tiles stay in L2), and the grid takes every sequence's last query tile (the heaviest under
the causal mask) before any second-to-last one (`cta_tile`).

- Shared memory: the Q tile and rings of K and V tiles in the 128-byte-swizzle image
  `panel_chunk` describes, which is the image of CuTe's K-major SW128 layouts (`make_smem_layout_a/b`,
  checked at trace time by tests/solutions/test_wgmma_prefill_cute.py). All 256 threads write it with
  16-byte cp.async through a flat view (K/V rows through the page table, staged per tile in a ring of four
  row lists filled one barrier before their first copy; rows past a sequence's end re-read its last row); the
  MMAs read it through CuTe's swizzled views: Q·Kᵀ with both operands K-major, P·V with V's transposed view
  (MN-major). Plan `wgmma` copies K(j+1) and V(j) during tile j (rings of two); plan `wgmmapipe` K(j+2) and,
  at head dim 128, V(j+1) (rings of three; see `FlashPrefillWgmma`). Every tile commits V's cp.async group,
  then K's; `cp.async.wait_group` for all but the groups the next tiles need, `fence.proxy.async` (the copies
  become visible to the async proxy wgmma reads through) and one CTA barrier per KV tile publish them.
- Tile j of the walk (KV tiles from the last to the first): each warpgroup issues S(j) = Q·K(j)ᵀ (m64n{bn}k16)
  and O += P(j-1)·V(j-1) (m64n{d}k16, P from registers), then the copies; it waits for S(j)
  only and runs the base-2 online softmax on it (fp32; sm_scale·log2(e) folded into one scale; the causal
  mask only on tiles crossing a warp's diagonal; masked logits -3e38, a row whose max is still -3e38 uses 0, so no
  NaN forms) while the tensor cores run P(j-1)·V(j-1); once that product is done it rescales O and rounds
  P(j) into the register A operand (FlashAttention-3's intra-warpgroup overlap, one P buffer).
- Epilogue: O / l rounded to bf16 through shared memory (each warpgroup its own 64 rows of the Q tile's
  space) into 16-byte row stores; lse = m + log2(l).

Accumulator register 4·jt + 2·half + c of a thread holds (row `acc_row(lane, 2·half + c)` of its warp's 16,
column 8·jt + `acc_col(lane, c)`); P's register A operand is S's accumulators in the same order. Symbolic
sizes: one compilation per instantiation, cached, called with torch tensors through TVM FFI.
"""

import math
from typing import Any

import cutlass
import cutlass.cute as cute
import cutlass.utils.hopper_helpers as sm90_utils
import torch
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.cute.runtime import make_fake_compact_tensor
from cutlass.memory.smem import SmemAllocator
from cutlass.tensor_utils import LayoutEnum

from problems.attention.solutions._flash_prefill import NEG_BIG, acc_col, acc_row, copy_row, kv_row
from problems.attention.solutions._flash_prefill_sm90 import BM, THREADS, WG_ROWS, Sm90Tiling, panel_chunk

LOG2E = 1.0 / math.log(2.0)
WG_THREADS = 128
ROW_LISTS = 4  # ring of page-table row lists: tiles j-1 .. j+3 never share a slot while one may be read
SMEM_LIMIT = 232448  # bytes of shared memory one CTA may opt into on sm_90 (227 KB)


def tiled_mmas(t: Sm90Tiling) -> tuple[Any, Any]:
    """(S = Q·Kᵀ, O = P·V) warpgroup MMAs of two warpgroups stacked along M; call inside @cute.jit."""
    bf16, k_major, mn_major = cutlass.BFloat16, cute.nvgpu.OperandMajorMode.K, cute.nvgpu.OperandMajorMode.MN
    qk = sm90_utils.make_trivial_tiled_mma(bf16, bf16, k_major, k_major, cutlass.Float32, (2, 1, 1), (WG_ROWS, t.bn))
    pv = sm90_utils.make_trivial_tiled_mma(
        bf16, bf16, k_major, mn_major, cutlass.Float32, (2, 1, 1), (WG_ROWS, t.d), warpgroup.OperandSource.RMEM
    )
    return qk, pv


def smem_layouts(t: Sm90Tiling, k_ring: int, v_ring: int) -> tuple[Any, Any, Any]:
    """CuTe's K-major SW128 layouts of the Q tile (BM, d, 1), the K ring (bn, d, k_ring) and the V ring
    (bn, d, v_ring); inside @cute.jit."""
    q = sm90_utils.make_smem_layout_a(LayoutEnum.ROW_MAJOR, (BM, t.bn, t.d), cutlass.BFloat16, 1)
    k = sm90_utils.make_smem_layout_b(LayoutEnum.ROW_MAJOR, (BM, t.bn, t.d), cutlass.BFloat16, k_ring)
    v = sm90_utils.make_smem_layout_b(LayoutEnum.ROW_MAJOR, (BM, t.bn, t.d), cutlass.BFloat16, v_ring)
    return q, k, v


def transposed(s_v: Any, t: Sm90Tiling, ring: int) -> Any:
    """The (d, bn, ring) view of a V ring (bn, d, ring), a tensor or a layout: V(j)ᵀ, the MN-major B operand of P·V."""
    return cute.composition(s_v, cute.make_layout((t.d, t.bn, ring), stride=(t.bn, 1, t.bn * t.d)))


class FlashPrefillWgmma:
    """The template for one `Sm90Tiling` and copy distance; ``__call__`` runs it on (q, k, v, qo_indptr,
    kv_indptr, table, last).

    Tile j of the walk copies K(j + k_ahead) and V(j + v_ahead) (V(t) is first read one tile after K(t)): plan
    `wgmma` 1 and 0, plan `wgmmapipe` 2 and, where six K/V tiles fit beside Q (head dim 128), 1, else 0. The
    rings hold k_ahead + 1 K tiles and v_ahead + 2 V tiles."""

    def __init__(self, tiling: Sm90Tiling, k_ahead: int = 1, v_ahead: int = 0) -> None:
        if not 0 <= v_ahead < k_ahead <= v_ahead + 2:
            raise ValueError(f"unsupported copy distance k_ahead={k_ahead} v_ahead={v_ahead}")
        self.t, self.k_ahead, self.v_ahead = tiling, k_ahead, v_ahead
        self.k_ring, self.v_ring = k_ahead + 1, v_ahead + 2
        limit = SMEM_LIMIT
        if self.smem_bytes > limit:
            raise ValueError(f"{self.smem_bytes} bytes of shared memory exceed the {limit} a CTA may have")
        self._kernel: list = []

    @property
    def smem_bytes(self) -> int:
        """Q tile, K and V rings (bf16), the row-list ring (int32)."""
        t = self.t
        return (BM + (self.k_ring + self.v_ring) * t.bn) * t.d * 2 + ROW_LISTS * t.bn * 4

    @property
    def wait_groups(self) -> int:
        """cp.async groups (each tile commits V's, then K's) tile j's barrier leaves in flight: the newest ones
        after both K(j)'s (committed at tile j - k_ahead) and V(j-1)'s (at tile j - 1 - v_ahead)."""
        return min(2 * self.v_ahead + 1, 2 * self.k_ahead - 2)

    def storage(self) -> Any:
        """Shared memory: Q tile, K ring, V ring (1024-byte aligned for the swizzle), the row-list ring."""
        t, k_ring, v_ring = self.t, self.k_ring, self.v_ring

        @cute.struct
        class Storage:
            sq: cute.struct.Align[cute.struct.MemRange[cutlass.BFloat16, BM * t.d], 1024]
            sk: cute.struct.Align[cute.struct.MemRange[cutlass.BFloat16, k_ring * t.bn * t.d], 1024]
            sv: cute.struct.Align[cute.struct.MemRange[cutlass.BFloat16, v_ring * t.bn * t.d], 1024]
            rows: cute.struct.Align[cute.struct.MemRange[cutlass.Int32, ROW_LISTS * t.bn], 16]

        return Storage

    # --- device code -------------------------------------------------------------------------------
    @cute.jit
    def fill_rows(self, s_rows: cute.Tensor, m_table: cute.Tensor, kv0, lk, j, ntile):
        # pool rows of walk tile j (KV tile ntile - 1 - j), one thread a token
        tidx, _, _ = cute.arch.thread_idx()
        if j < ntile:  # noqa: SIM102 (dynamic conditions, one per if)
            if tidx < self.t.bn:
                token = cutlass.min((ntile - 1 - j) * self.t.bn + tidx, lk - 1)
                s_rows[j % ROW_LISTS, tidx] = kv_row(m_table, kv0, token, self.t.page)

    @cute.jit
    def copy_tile(
        self, atom: cute.CopyAtom, s_dst: cute.Tensor, ring: int, g_src: cute.Tensor, s_rows: cute.Tensor, kvh, j, ntile
    ):
        # K or V of walk tile j (if there is one) into ring buffer j % ring (16-byte chunks of the flat view),
        # then the commit of this cp.async group (empty past the walk: the groups stay counted per tile)
        t = self.t
        tidx, _, _ = cute.arch.thread_idx()
        cc = tidx % t.chunks
        if j < ntile:
            for i in cutlass.range_constexpr(t.kv_loads):
                r = copy_row(tidx, i, t.row_step, t.chunks)
                dst = j % ring * t.bn * t.chunks + panel_chunk(r, cc, t.bn)
                cute.copy(atom, g_src[(0, 0, None), (s_rows[j % ROW_LISTS, r], kvh, cc)], s_dst[(None,), (dst,)])
        cute.arch.cp_async_commit_group()

    @cute.jit
    def publish(self, in_flight: int):
        # this thread's copies but the newest ``in_flight`` groups landed; hand them to the async proxy wgmma
        # reads through; then everyone's
        cute.arch.cp_async_wait_group(in_flight)
        cute.arch.fence_proxy("async.shared", space="cta")
        cute.arch.sync_threads()

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
        o_regs = t.o_regs
        tidx, _, _ = cute.arch.thread_idx()
        bid, _, _ = cute.arch.block_idx()
        h = bid % hq
        kvh = h // t.group
        wg = cute.arch.make_warp_uniform(tidx // WG_THREADS)
        warp = tidx % WG_THREADS // 32  # warp of the warpgroup: its 16 rows of the m64 tile
        lane = tidx % 32
        cc = tidx % chunks
        mma_qk, mma_pv = tiled_mmas(t)

        storage = SmemAllocator().allocate(self.storage())
        # flat 16-byte chunk views the copies write ((8,), (chunks,)), and CuTe's swizzled views the MMAs read
        sQc = cute.zipped_divide(cute.make_tensor(storage.sq.data_ptr(), cute.make_layout((BM * d,))), (8,))
        kr, vr, ka, va = self.k_ring, self.v_ring, self.k_ahead, self.v_ahead
        sKc = cute.zipped_divide(cute.make_tensor(storage.sk.data_ptr(), cute.make_layout((kr * bn * d,))), (8,))
        sVc = cute.zipped_divide(cute.make_tensor(storage.sv.data_ptr(), cute.make_layout((vr * bn * d,))), (8,))
        sQf = cute.make_tensor(storage.sq.data_ptr(), cute.make_layout((BM * d,)))
        sRows = cute.make_tensor(storage.rows.data_ptr(), cute.make_layout((ROW_LISTS, bn), stride=(bn, 1)))
        sQ = storage.sq.get_tensor(q_layout.outer, swizzle=q_layout.inner)
        sK = storage.sk.get_tensor(k_layout.outer, swizzle=k_layout.inner)
        sVt = transposed(storage.sv.get_tensor(v_layout.outer, swizzle=v_layout.inner), t, vr)
        gQ = cute.zipped_divide(mQ, (1, 1, 8))
        gK = cute.zipped_divide(mK, (1, 1, 8))
        gV = cute.zipped_divide(mV, (1, 1, 8))
        gO = cute.zipped_divide(mO, (1, 1, 8))
        g2s = cute.make_copy_atom(
            cpasync.CopyG2SOp(cache_mode=cpasync.LoadCacheMode.GLOBAL), cutlass.BFloat16, num_bits_per_copy=128
        )

        # the shared-memory operands are partitioned per warpgroup, the register tensors per thread
        wg_slice = cute.make_layout(2, stride=WG_THREADS)(wg)
        thr_qk = mma_qk.get_slice(wg_slice)
        thr_pv = mma_pv.get_slice(wg_slice)
        tSrQ = mma_qk.make_fragment_A(thr_qk.partition_A(sQ))
        tSrK = mma_qk.make_fragment_B(thr_qk.partition_B(sK))
        tOrVt = mma_pv.make_fragment_B(thr_pv.partition_B(sVt))
        acc_s = cute.make_rmem_tensor(thr_qk.partition_shape_C((BM, bn)), cutlass.Float32)
        acc_o = cute.make_rmem_tensor(thr_pv.partition_shape_C((BM, d)), cutlass.Float32)
        # P's register A operand, and S's accumulators viewed in its shape: both compact, so A element i is S
        # element i (the same (row, column): the fragments agree, tests/solutions/test_wgmma_prefill_cute.py)
        r_p = cute.make_rmem_tensor(thr_pv.partition_shape_A((BM, bn)), cutlass.BFloat16)
        p_view = cute.make_tensor(acc_s.iterator, r_p.layout)
        m_run = cute.make_rmem_tensor((2,), cutlass.Float32)
        l_run = cute.make_rmem_tensor((2,), cutlass.Float32)
        alpha = cute.make_rmem_tensor((2,), cutlass.Float32)
        out8 = cute.make_rmem_tensor((8,), cutlass.BFloat16)

        seq, mblk = self.cta_tile(mQO, bid // hq)
        if seq >= 0:
            q0 = mQO[seq]
            lq = mQO[seq + 1] - q0
            kv0 = mKVP[seq]
            lk = mKVP[seq + 1] - kv0
            if cutlass.const_expr(page > 1):
                lk = (mKVP[seq + 1] - kv0 - 1) * page + mLast[seq]
            m0 = mblk * BM
            nrows = cutlass.min(lq - m0, BM)
            delta = lk - lq  # query i sees KV tokens j <= i + delta
            ntile = (m0 + nrows + delta + bn - 1) // bn
            row0 = wg * WG_ROWS + warp * 16  # first tile row of this thread's warp

            # the row lists of the tiles the copies before tile 1's barrier read
            for i in cutlass.range_constexpr(ka + 1):
                self.fill_rows(sRows, mTable, kv0, lk, i, ntile)
            cute.arch.sync_threads()
            for i in cutlass.range_constexpr(t.q_loads):
                r = copy_row(tidx, i, t.row_step, chunks)
                cute.copy(
                    g2s,
                    gQ[(0, 0, None), (q0 + cutlass.min(m0 + r, lq - 1), h, cc)],
                    sQc[(None,), (panel_chunk(r, cc, BM),)],
                )
            # the copies of the walk tiles -k_ahead .. -1 (before the walk): V's group (Q joins the first), K's
            for i in cutlass.range_constexpr(-ka, 0):
                if cutlass.const_expr(i + va >= 0):
                    self.copy_tile(g2s, sVc, vr, gV, sRows, kvh, i + va, ntile)
                else:
                    cute.arch.cp_async_commit_group()
                self.copy_tile(g2s, sKc, kr, gK, sRows, kvh, i + ka, ntile)
            m_run.fill(NEG_BIG)
            l_run.fill(0.0)
            acc_o.fill(0.0)
            self.publish(2 * ka - 2)  # Q and K(0)

            # walk tile 0: S(0), then the copies of V(v_ahead) and K(k_ahead) run under its softmax
            warpgroup.fence()
            self.issue_s(acc_s, tSrQ, tSrK, 0, kr)
            self.fill_rows(sRows, mTable, kv0, lk, ka + 1, ntile)
            self.copy_tile(g2s, sVc, vr, gV, sRows, kvh, va, ntile)
            self.copy_tile(g2s, sKc, kr, gK, sRows, kvh, ka, ntile)
            warpgroup.wait_group(0)
            self.softmax(acc_s, m_run, l_run, alpha, scale2, ntile - 1, m0 + row0, delta, lane)
            r_p.store(p_view.load().to(cutlass.BFloat16))
            for j in cutlass.range(1, ntile, unroll=1):
                # K(j) and V(j-1) landed; every warpgroup is done with K(j-1), V(j-2) and row list j + k_ahead - 3
                self.publish(self.wait_groups)
                warpgroup.fence()
                self.issue_s(acc_s, tSrQ, tSrK, j, kr)
                self.issue_pv(acc_o, r_p, tOrVt, j - 1, vr)
                self.fill_rows(sRows, mTable, kv0, lk, j + ka + 1, ntile)
                self.copy_tile(g2s, sVc, vr, gV, sRows, kvh, j + va, ntile)
                self.copy_tile(g2s, sKc, kr, gK, sRows, kvh, j + ka, ntile)
                warpgroup.wait_group(1)  # S(j) landed; P(j-1)·V(j-1) may still run
                self.softmax(acc_s, m_run, l_run, alpha, scale2, ntile - 1 - j, m0 + row0, delta, lane)
                warpgroup.wait_group(0)  # P(j-1)·V(j-1) landed: O and the A operand are free
                for i in cutlass.range_constexpr(o_regs):
                    acc_o[i] = acc_o[i] * alpha[i % 4 // 2]
                r_p.store(p_view.load().to(cutlass.BFloat16))
            # the last product: P(ntile-1)·V(ntile-1)
            self.publish(0)
            warpgroup.fence()
            self.issue_pv(acc_o, r_p, tOrVt, ntile - 1, vr)
            warpgroup.wait_group(0)

            # epilogue: each warpgroup writes only its own 64 rows of sQ, which only its own wgmma read
            for hf in cutlass.range_constexpr(2):
                total = cute.arch.warp_reduction_sum(l_run[hf], threads_in_group=4)
                alpha[hf] = cutlass.Float32(1.0) / total
                row = row0 + acc_row(lane, 2 * hf)
                if lane % 4 == 0:  # noqa: SIM102 (dynamic conditions, one per if)
                    if row < nrows:
                        mLse[q0 + m0 + row, h] = m_run[hf] + cute.math.log2(total)
            for jt in cutlass.range_constexpr(d // 8):
                for c in cutlass.range_constexpr(4):
                    row = row0 + acc_row(lane, c)
                    sQf[panel_chunk(row, jt, BM) * 8 + acc_col(lane, c)] = (acc_o[jt * 4 + c] * alpha[c // 2]).to(
                        cutlass.BFloat16
                    )
            cute.arch.sync_threads()
            for i in cutlass.range_constexpr(t.q_loads):
                r = copy_row(tidx, i, t.row_step, chunks)
                if r < nrows:
                    cute.autovec_copy(sQc[(None,), (panel_chunk(r, cc, BM),)], out8)
                    cute.autovec_copy(out8, gO[(0, 0, None), (q0 + m0 + r, h, cc)])

    @cute.jit
    def cta_tile(self, mQO: cute.Tensor, y):
        """(sequence, query tile) of the CTAs numbered y (one a query head; -1: none), heaviest first.

        A query tile's cost is the KV tiles it walks, which grows with its position in the sequence, so CTAs
        take the sequences' last tiles first, then their second-to-last tiles, and so on (rank r from the end
        of every sequence before rank r + 1; sequences in order within a rank), which leaves the short tiles
        for the end of the grid. Each warp works this out on its own: lane l holds the tile count of sequence
        base + l (32 sequences at a time), a ballot names the sequences with a tile of rank r, and the y-th of
        them (counting on from the ranks before) is the CTA's."""
        lane = cute.arch.lane_idx()
        batch = cute.size(mQO, mode=[0]) - 1
        seq = cutlass.Int32(-1)
        mblk = cutlass.Int32(0)
        rem = cutlass.Int32(y)
        for base in cutlass.range(0, batch, 32, unroll=1):
            if seq < 0:
                b = base + lane
                ntb = cutlass.Int32(0)
                if b < batch:
                    ntb = (mQO[b + 1] - mQO[b] + BM - 1) // BM
                rank = cutlass.Int32(0)
                more = cutlass.Int32(1)
                while more > 0:
                    has = ntb > rank
                    mask = cute.arch.vote_ballot_sync(has)
                    count = cute.arch.popc(mask)
                    if rem < count:
                        below = cute.arch.popc(cutlass.Uint32(mask) & cute.arch.lanemask_lt())
                        pick = cute.arch.vote_ballot_sync(has & (cutlass.Int32(below) == rem))
                        seq = base + 31 - cutlass.Int32(cute.arch.clz(pick))
                        mblk = (mQO[seq + 1] - mQO[seq] + BM - 1) // BM - 1 - rank
                        more = cutlass.Int32(0)
                    else:
                        rem = rem - count
                        rank = rank + 1
                        if count == 0:
                            more = cutlass.Int32(0)
        return seq, mblk

    @cute.jit
    def issue_s(self, acc: cute.Tensor, a: cute.Tensor, b: cute.Tensor, j, ring: int):
        # S(j) = Q K(j)^T over d / 16 k-steps, K(j) in ring buffer j % ring. The MMA whose accumulate flag this
        # toggles is made here: a flag set on the kernel's MMA inside a loop would escape the loop's IR region
        mma, _ = tiled_mmas(self.t)
        mma.set(warpgroup.Field.ACCUMULATE, False)
        for kk in cutlass.range_constexpr(self.t.d // 16):
            cute.gemm(mma, acc, a[None, None, kk, 0], b[None, None, kk, j % ring], acc)
            mma.set(warpgroup.Field.ACCUMULATE, True)
        warpgroup.commit_group()

    @cute.jit
    def issue_pv(self, acc: cute.Tensor, p: cute.Tensor, vt: cute.Tensor, j, ring: int):
        # O += P(j) V(j) over bn / 16 k-steps, V(j) in ring buffer j % ring (an MMA of its own, as in issue_s)
        _, mma = tiled_mmas(self.t)
        mma.set(warpgroup.Field.ACCUMULATE, True)
        for kk in cutlass.range_constexpr(self.t.bn // 16):
            cute.gemm(mma, acc, p[None, None, kk], vt[None, None, kk, j % ring], acc)
        warpgroup.commit_group()

    @cute.jit
    def softmax(self, acc, m_run, l_run, alpha, scale2, n, q_row0, delta, lane):
        # S of KV tile n has landed: scale, mask, exponentiate in place (P in fp32); alpha rescales O
        bn = self.t.bn
        for i in cutlass.range_constexpr(self.t.s_regs):
            acc[i] = acc[i] * scale2
        if (n + 1) * bn > q_row0 + delta + 1:  # the tile crosses the causal diagonal of the warp's first row
            for jt in cutlass.range_constexpr(bn // 8):
                for c in cutlass.range_constexpr(4):
                    if n * bn + jt * 8 + acc_col(lane, c) > q_row0 + acc_row(lane, c) + delta:
                        acc[jt * 4 + c] = cutlass.Float32(NEG_BIG)
        for hf in cutlass.range_constexpr(2):
            mx = m_run[hf]
            for jt in cutlass.range_constexpr(bn // 8):
                for e in cutlass.range_constexpr(2):
                    mx = cute.arch.fmax(mx, acc[jt * 4 + 2 * hf + e])
            mx = cute.arch.warp_reduction_max(mx, threads_in_group=4)
            # a row with every logit masked so far keeps p = 0 (2^(-3e38 - 0))
            m_use = cutlass.select_(mx == cutlass.Float32(NEG_BIG), cutlass.Float32(0.0), mx)
            alpha[hf] = cute.math.exp2(m_run[hf] - m_use, fastmath=True)
            rs = cutlass.Float32(0.0)
            for jt in cutlass.range_constexpr(bn // 8):
                for e in cutlass.range_constexpr(2):
                    p = cute.math.exp2(acc[jt * 4 + 2 * hf + e] - m_use, fastmath=True)
                    acc[jt * 4 + 2 * hf + e] = p
                    rs = rs + p
            l_run[hf] = l_run[hf] * alpha[hf] + rs
            m_run[hf] = mx

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
        q_layout, k_layout, v_layout = smem_layouts(self.t, self.k_ring, self.v_ring)
        total_q = cute.size(mQ, mode=[0])
        batch = cute.size(mQO, mode=[0]) - 1
        tiles = (total_q + BM - 1) // BM + batch
        self.kernel(mQ, mK, mV, mQO, mKVP, mTable, mLast, mO, mLse, scale2, q_layout, k_layout, v_layout).launch(
            grid=[tiles * self.t.hq, 1, 1], block=[THREADS, 1, 1]
        )

    def compiled(self):
        """The kernel compiled once for symbolic sizes (sm_90a)."""
        if not self._kernel:
            t = self.t
            total_q, rows, batch1, n_table, n_last = (cute.sym_int() for _ in range(5))
            bf16 = cutlass.BFloat16
            q = make_fake_compact_tensor(bf16, (total_q, t.hq, t.d), stride_order=(2, 1, 0), assumed_align=16)
            kv = make_fake_compact_tensor(bf16, (rows, t.hkv, t.d), stride_order=(2, 1, 0), assumed_align=16)
            indptr = make_fake_compact_tensor(cutlass.Int32, (batch1,), assumed_align=4)
            table = make_fake_compact_tensor(cutlass.Int32, (n_table,), assumed_align=4)
            last = make_fake_compact_tensor(cutlass.Int32, (n_last,), assumed_align=4)
            lse = make_fake_compact_tensor(cutlass.Float32, (total_q, t.hq), stride_order=(1, 0), assumed_align=4)
            args = (q, kv, kv, indptr, indptr, table, last, q, lse, cutlass.Float32(1.0))
            self._kernel.append(cute.compile(self.launch, *args, options="--enable-tvm-ffi"))
        return self._kernel[0]

    def __call__(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        qo_indptr: torch.Tensor,
        kv_indptr: torch.Tensor,
        table: torch.Tensor,
        last: torch.Tensor,
        sm_scale: float,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Paged K/V arrive as [pages, page size, Hkv, D] and run as the [pages · page size, Hkv, D] view;
        ragged K/V pass ``kv_indptr`` as the unused ``table``/``last`` (likewise ``last`` at page size 1)."""
        kernel = self.compiled()
        rows = k.shape[0] * (k.shape[1] if k.dim() == 4 else 1)
        out = torch.empty_like(q)
        lse = torch.empty(q.shape[:2], dtype=torch.float32, device=q.device)
        kernel(
            q.contiguous(),
            k.reshape(rows, self.t.hkv, self.t.d),
            v.reshape(rows, self.t.hkv, self.t.d),
            qo_indptr.contiguous(),
            kv_indptr.contiguous(),
            table.contiguous(),
            last.contiguous(),
            out,
            lse,
            float(sm_scale) * LOG2E,
        )
        return out, lse
