"""p06 gqa_paged_prefill_causal_h24_kv8_d128_ps64_bf16 — plan `fa3`, CuTe DSL: flash attention (WGMMA).

Plan: FlashAttention-3's CTA structure (`_flash_prefill_fa3_cutedsl.py`, inlined in this file): a producer warpgroup
copies Q and K/V tiles through the page table with cp.async into rings of three K and three V tiles, tracked by
mbarriers (no CTA barrier per KV tile), and two consumer warpgroups of 64 query rows each run plan `wgmmalean`'s
tile loop (S(j) = Q·K(j)ᵀ and O += P(j-1)·V(j-1) on CuTe's warpgroup MMA atoms, the softmax of S(j) under
P(j-1)·V(j-1)), ping-ponging through named barriers so one's softmax runs under the other's MMAs; `setmaxnreg` moves
registers from the producer to the consumers. Instantiated for 24 query / 8 KV heads, head dim 128, page size 64.
Compute-bound: 151 GFLOP of bf16 matmul at WORKLOAD.
"""

import math
from types import SimpleNamespace
from typing import Any

import cutlass
import cutlass.cute as cute
import cutlass.utils.hopper_helpers as sm90_utils
import torch
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.cute.runtime import make_fake_compact_tensor
from cutlass.memory.smem import SmemAllocator
from cutlass.tensor_utils import LayoutEnum

# bundle: problems/attention/solutions/_flash_prefill.py as FP
# bundle: problems/attention/solutions/_flash_prefill_sm90.py as SM90
# bundle: problems/attention/solutions/_flash_prefill_wgmma_cutedsl.py as FWC
# bundle: problems/attention/solutions/_flash_prefill_wgmmalean_cutedsl.py as FWL
# bundle: problems/attention/solutions/_flash_prefill_fa3_cutedsl.py as FA3

# ---- bundled shared kernel code (python -m problems._bundle; edit the source modules) ----

# problems/attention/solutions/_flash_prefill.py
_FP_BN = 64  # KV tokens per tile (also page size 64: one tile is one page)
_FP_THREADS = 128  # 4 warps
_FP_WARPS = _FP_THREADS // 32
_FP_NEG_BIG = -3.0e38  # finite "minus infinity" for masked logits: 2^(NEG_BIG - m) is 0 and never NaN


class _FP_Tiling:
    """The compile-time shape of one instantiation: heads, head dim and page size (0 = ragged K/V).

    A plain class: `dataclasses` generates its methods as dynamic code, which the verifier refuses in a submission."""

    def __init__(self, hq: int, hkv: int, d: int, page: int) -> None:
        if hq % hkv or d % 64 or page not in (0, 1, _FP_BN):
            raise ValueError(f"unsupported prefill tiling hq={hq} hkv={hkv} d={d} page={page}")
        self.hq, self.hkv, self.d, self.page = hq, hkv, d, page

    @property
    def group(self) -> int:
        """Query heads per KV head."""
        return self.hq // self.hkv

    @property
    def bm(self) -> int:
        """Query rows per CTA: one m16 tile a warp (two spill registers in both DSLs even at head dim 128)."""
        return _FP_WARPS * 16

    @property
    def chunks(self) -> int:
        """16-byte chunks per row of a Q/K/V tile."""
        return self.d // 8

    @property
    def row_step(self) -> int:
        """Rows one pass of the CTA's 16-byte copies covers (a thread copies one chunk a row)."""
        return _FP_THREADS // self.chunks

    @property
    def kv_loads(self) -> int:
        """16-byte copies per thread for one K or V tile."""
        return _FP_BN // self.row_step

    @property
    def q_loads(self) -> int:
        """16-byte copies per thread for the Q tile (and for the output tile)."""
        return self.bm // self.row_step

    @property
    def smem_bytes(self) -> int:
        """Q tile + one K tile + one V tile, bf16."""
        return (self.bm + 2 * _FP_BN) * self.d * 2

    def grid_tiles(self, total_q: int, batch: int) -> int:
        """Query tiles the grid covers: at most ceil(total_q / bm) plus one partial tile per sequence."""
        return (total_q + self.bm - 1) // self.bm + batch


def _FP_swizzled_chunk(row, chunk, chunks):
    """Shared-memory chunk index of 16-byte chunk ``chunk`` of tile row ``row``: the low three chunk bits
    are XOR-ed with row % 8, so the 8 rows one ldmatrix matrix reads fall in 8 different bank groups."""
    return row * chunks + (chunk ^ (row % 8))


def _FP_copy_row(tid, i, row_step, chunks):
    """Tile row of a thread's ``i``-th 16-byte copy (its chunk is ``tid % chunks``)."""
    return tid // chunks + row_step * i


def _FP_flat_copy(tid, i, chunks):
    """(row, chunk) of a thread's ``i``-th 16-byte copy when a row's chunks do not divide the CTA: the
    CTA's copies walk the tile's chunks in row-major order, THREADS at a time."""
    f = tid + _FP_THREADS * i
    return f // chunks, f % chunks


def _FP_ldsm_rows_then_k(lane):
    """(row, chunk) offsets of the address ``lane`` gives ldmatrix.x4 for a 16x16 block whose matrices
    are rows 0-7 | rows 8-15 | rows 0-7, k + 8 | rows 8-15, k + 8: the mma A fragment a0..a3 (Q, P·V's
    V read with .trans, whose 'rows' are KV tokens and k the output dims)."""
    return lane % 8 + 8 * (lane // 8 % 2), lane // 16


def _FP_ldsm_n_pairs(lane):
    """(row, chunk) offsets for ldmatrix.x4 of K rows n 0-7 | n 0-7, k + 8 | n 8-15 | n 8-15, k + 8:
    b0, b1 of the n-tile n0 and b0, b1 of the n-tile n0 + 8 of Q·Kᵀ."""
    return lane % 8 + 8 * (lane // 16), lane // 8 % 2


def _FP_acc_row(lane, c):
    """Row of accumulator register ``c`` (0..3) of an m16n8 tile: rows g and g + 8, g = lane // 4."""
    return lane // 4 + 8 * (c // 2)


def _FP_acc_col(lane, c):
    """Column of accumulator register ``c`` of an m16n8 tile: 2·(lane % 4) and the next one."""
    return 2 * (lane % 4) + c % 2


def _FP_kv_row(table, kv_start, token, page):
    """Row of the [pool rows, Hkv, D] K/V view holding token ``token`` of a sequence: ragged (page 0)
    rows are contiguous from ``kv_start``; page size 1 reads the page table ``table`` at ``kv_start``;
    page size 64 reads it once per page and adds the slot."""
    if page == 0:
        return kv_start + token
    if page == 1:
        return table[kv_start + token]
    return table[kv_start + token // page] * page + token % page


FP = SimpleNamespace(
    BN=_FP_BN,
    THREADS=_FP_THREADS,
    WARPS=_FP_WARPS,
    NEG_BIG=_FP_NEG_BIG,
    Tiling=_FP_Tiling,
    swizzled_chunk=_FP_swizzled_chunk,
    copy_row=_FP_copy_row,
    flat_copy=_FP_flat_copy,
    ldsm_rows_then_k=_FP_ldsm_rows_then_k,
    ldsm_n_pairs=_FP_ldsm_n_pairs,
    acc_row=_FP_acc_row,
    acc_col=_FP_acc_col,
    kv_row=_FP_kv_row,
)


# problems/attention/solutions/_flash_prefill_sm90.py
_SM90_THREADS = 256  # two warpgroups
_SM90_BM = 128  # query rows per CTA, 64 per warpgroup
_SM90_WG_ROWS = 64
_SM90_SWIZZLE_128B = 3  # CUtensorMapSwizzle value TVM's descriptor encoder takes for the 128-byte swizzle
_SM90_ROWS_PER_GROUP_BYTES = 1024  # eight 128-byte rows: the stride byte offset of both operand majors
_SM90_PAGE_SIZES = (0, 1, 64)  # ragged K/V, and the page sizes of the problems


class _SM90_Sm90Tiling:
    """The compile-time shape of one instantiation: heads, head dim and page size (0 = ragged K/V).

    A plain class: `dataclasses` generates its methods as dynamic code, which the verifier refuses in a submission."""

    def __init__(self, hq: int, hkv: int, d: int, page: int) -> None:
        if hq % hkv or d not in (128, 256) or page not in _SM90_PAGE_SIZES:
            raise ValueError(f"unsupported sm90 prefill tiling hq={hq} hkv={hkv} d={d} page={page}")
        self.hq, self.hkv, self.d, self.page = hq, hkv, d, page

    @property
    def group(self) -> int:
        """Query heads per KV head."""
        return self.hq // self.hkv

    @property
    def bn(self) -> int:
        """KV tokens per tile: 128 at head dim 128, 64 at 256 (the fp32 O accumulator is d / 2 registers)."""
        return 128 if self.d == 128 else 64

    @property
    def chunks(self) -> int:
        """16-byte chunks per row of a Q/K/V tile."""
        return self.d // 8

    @property
    def row_step(self) -> int:
        """Rows one pass of the CTA's 16-byte copies covers (a thread copies one chunk a row)."""
        return _SM90_THREADS // self.chunks

    @property
    def kv_loads(self) -> int:
        """16-byte copies per thread for one K or V tile."""
        return self.bn // self.row_step

    @property
    def q_loads(self) -> int:
        """16-byte copies per thread for the Q tile (and for the output tile)."""
        return _SM90_BM // self.row_step

    @property
    def s_regs(self) -> int:
        """fp32 registers a thread holds of one warpgroup's S tile (64 x bn)."""
        return self.bn // 2

    @property
    def o_regs(self) -> int:
        """fp32 registers a thread holds of one warpgroup's O tile (64 x d)."""
        return self.d // 2

    @property
    def smem_bytes(self) -> int:
        """Q tile + two K and two V tiles (bf16), the ring of four page-table row lists (int32)."""
        return (_SM90_BM + 4 * self.bn) * self.d * 2 + 4 * self.bn * 4

    def grid_tiles(self, total_q: int, batch: int) -> int:
        """Query tiles the grid covers: at most ceil(total_q / BM) plus one partial tile per sequence."""
        return (total_q + _SM90_BM - 1) // _SM90_BM + batch


def _SM90_panel_chunk(row, chunk, rows):
    """16-byte chunk index, in a tile of ``rows`` rows, of chunk ``chunk`` of row ``row`` (128-byte swizzle)."""
    return chunk // 8 * rows * 8 + row * 8 + (chunk % 8 ^ row % 8)


def _SM90_k_major_step(kk, rows):
    """Byte offset of k-step ``kk`` (16 head-dim columns) in a K-major tile of ``rows`` rows."""
    return kk // 4 * rows * 128 + kk % 4 * 32


def _SM90_mn_major_step(kk):
    """Byte offset of k-step ``kk`` (16 tokens) in the MN-major V tile."""
    return kk * 16 * 128


def _SM90_panel_bytes(rows):
    """Bytes of one 64-column panel of a ``rows``-row tile: the V operand's leading byte offset."""
    return rows * 128


SM90 = SimpleNamespace(
    THREADS=_SM90_THREADS,
    BM=_SM90_BM,
    WG_ROWS=_SM90_WG_ROWS,
    SWIZZLE_128B=_SM90_SWIZZLE_128B,
    ROWS_PER_GROUP_BYTES=_SM90_ROWS_PER_GROUP_BYTES,
    PAGE_SIZES=_SM90_PAGE_SIZES,
    Sm90Tiling=_SM90_Sm90Tiling,
    panel_chunk=_SM90_panel_chunk,
    k_major_step=_SM90_k_major_step,
    mn_major_step=_SM90_mn_major_step,
    panel_bytes=_SM90_panel_bytes,
)


# problems/attention/solutions/_flash_prefill_wgmma_cutedsl.py
_FWC_LOG2E = 1.0 / math.log(2.0)
_FWC_WG_THREADS = 128
_FWC_ROW_LISTS = 4  # ring of page-table row lists: tiles j-1 .. j+3 never share a slot while one may be read
_FWC_SMEM_LIMIT = 232448  # bytes of shared memory one CTA may opt into on sm_90 (227 KB)


def _FWC_tiled_mmas(t: _SM90_Sm90Tiling) -> tuple[Any, Any]:
    """(S = Q·Kᵀ, O = P·V) warpgroup MMAs of two warpgroups stacked along M; call inside @cute.jit."""
    bf16, k_major, mn_major = cutlass.BFloat16, cute.nvgpu.OperandMajorMode.K, cute.nvgpu.OperandMajorMode.MN
    qk = sm90_utils.make_trivial_tiled_mma(
        bf16, bf16, k_major, k_major, cutlass.Float32, (2, 1, 1), (_SM90_WG_ROWS, t.bn)
    )
    pv = sm90_utils.make_trivial_tiled_mma(
        bf16, bf16, k_major, mn_major, cutlass.Float32, (2, 1, 1), (_SM90_WG_ROWS, t.d), warpgroup.OperandSource.RMEM
    )
    return qk, pv


def _FWC_smem_layouts(t: _SM90_Sm90Tiling, k_ring: int, v_ring: int) -> tuple[Any, Any, Any]:
    """CuTe's K-major SW128 layouts of the Q tile (BM, d, 1), the K ring (bn, d, k_ring) and the V ring
    (bn, d, v_ring); inside @cute.jit."""
    q = sm90_utils.make_smem_layout_a(LayoutEnum.ROW_MAJOR, (_SM90_BM, t.bn, t.d), cutlass.BFloat16, 1)
    k = sm90_utils.make_smem_layout_b(LayoutEnum.ROW_MAJOR, (_SM90_BM, t.bn, t.d), cutlass.BFloat16, k_ring)
    v = sm90_utils.make_smem_layout_b(LayoutEnum.ROW_MAJOR, (_SM90_BM, t.bn, t.d), cutlass.BFloat16, v_ring)
    return q, k, v


def _FWC_transposed(s_v: Any, t: _SM90_Sm90Tiling, ring: int) -> Any:
    """The (d, bn, ring) view of a V ring (bn, d, ring), a tensor or a layout: V(j)ᵀ, the MN-major B operand of P·V."""
    return cute.composition(s_v, cute.make_layout((t.d, t.bn, ring), stride=(t.bn, 1, t.bn * t.d)))


class _FWC_FlashPrefillWgmma:
    """The template for one `Sm90Tiling` and copy distance; ``__call__`` runs it on (q, k, v, qo_indptr,
    kv_indptr, table, last).

    Tile j of the walk copies K(j + k_ahead) and V(j + v_ahead) (V(t) is first read one tile after K(t)): plan
    `wgmma` 1 and 0, plan `wgmmapipe` 2 and, where six K/V tiles fit beside Q (head dim 128), 1, else 0. The
    rings hold k_ahead + 1 K tiles and v_ahead + 2 V tiles."""

    def __init__(self, tiling: _SM90_Sm90Tiling, k_ahead: int = 1, v_ahead: int = 0) -> None:
        if not 0 <= v_ahead < k_ahead <= v_ahead + 2:
            raise ValueError(f"unsupported copy distance k_ahead={k_ahead} v_ahead={v_ahead}")
        self.t, self.k_ahead, self.v_ahead = tiling, k_ahead, v_ahead
        self.k_ring, self.v_ring = k_ahead + 1, v_ahead + 2
        limit = _FWC_SMEM_LIMIT
        if self.smem_bytes > limit:
            raise ValueError(f"{self.smem_bytes} bytes of shared memory exceed the {limit} a CTA may have")
        self._kernel: list = []

    @property
    def smem_bytes(self) -> int:
        """Q tile, K and V rings (bf16), the row-list ring (int32)."""
        t = self.t
        return (_SM90_BM + (self.k_ring + self.v_ring) * t.bn) * t.d * 2 + _FWC_ROW_LISTS * t.bn * 4

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
            sq: cute.struct.Align[cute.struct.MemRange[cutlass.BFloat16, _SM90_BM * t.d], 1024]
            sk: cute.struct.Align[cute.struct.MemRange[cutlass.BFloat16, k_ring * t.bn * t.d], 1024]
            sv: cute.struct.Align[cute.struct.MemRange[cutlass.BFloat16, v_ring * t.bn * t.d], 1024]
            rows: cute.struct.Align[cute.struct.MemRange[cutlass.Int32, _FWC_ROW_LISTS * t.bn], 16]

        return Storage

    # --- device code -------------------------------------------------------------------------------
    @cute.jit
    def fill_rows(self, s_rows: cute.Tensor, m_table: cute.Tensor, kv0, lk, j, ntile):
        # pool rows of walk tile j (KV tile ntile - 1 - j), one thread a token
        tidx, _, _ = cute.arch.thread_idx()
        if j < ntile:  # noqa: SIM102 (dynamic conditions, one per if)
            if tidx < self.t.bn:
                token = cutlass.min((ntile - 1 - j) * self.t.bn + tidx, lk - 1)
                s_rows[j % _FWC_ROW_LISTS, tidx] = _FP_kv_row(m_table, kv0, token, self.t.page)

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
                r = _FP_copy_row(tidx, i, t.row_step, t.chunks)
                dst = j % ring * t.bn * t.chunks + _SM90_panel_chunk(r, cc, t.bn)
                cute.copy(atom, g_src[(0, 0, None), (s_rows[j % _FWC_ROW_LISTS, r], kvh, cc)], s_dst[(None,), (dst,)])
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
        wg = cute.arch.make_warp_uniform(tidx // _FWC_WG_THREADS)
        warp = tidx % _FWC_WG_THREADS // 32  # warp of the warpgroup: its 16 rows of the m64 tile
        lane = tidx % 32
        cc = tidx % chunks
        mma_qk, mma_pv = _FWC_tiled_mmas(t)

        storage = SmemAllocator().allocate(self.storage())
        # flat 16-byte chunk views the copies write ((8,), (chunks,)), and CuTe's swizzled views the MMAs read
        sQc = cute.zipped_divide(cute.make_tensor(storage.sq.data_ptr(), cute.make_layout((_SM90_BM * d,))), (8,))
        kr, vr, ka, va = self.k_ring, self.v_ring, self.k_ahead, self.v_ahead
        sKc = cute.zipped_divide(cute.make_tensor(storage.sk.data_ptr(), cute.make_layout((kr * bn * d,))), (8,))
        sVc = cute.zipped_divide(cute.make_tensor(storage.sv.data_ptr(), cute.make_layout((vr * bn * d,))), (8,))
        sQf = cute.make_tensor(storage.sq.data_ptr(), cute.make_layout((_SM90_BM * d,)))
        sRows = cute.make_tensor(storage.rows.data_ptr(), cute.make_layout((_FWC_ROW_LISTS, bn), stride=(bn, 1)))
        sQ = storage.sq.get_tensor(q_layout.outer, swizzle=q_layout.inner)
        sK = storage.sk.get_tensor(k_layout.outer, swizzle=k_layout.inner)
        sVt = _FWC_transposed(storage.sv.get_tensor(v_layout.outer, swizzle=v_layout.inner), t, vr)
        gQ = cute.zipped_divide(mQ, (1, 1, 8))
        gK = cute.zipped_divide(mK, (1, 1, 8))
        gV = cute.zipped_divide(mV, (1, 1, 8))
        gO = cute.zipped_divide(mO, (1, 1, 8))
        g2s = cute.make_copy_atom(
            cpasync.CopyG2SOp(cache_mode=cpasync.LoadCacheMode.GLOBAL), cutlass.BFloat16, num_bits_per_copy=128
        )

        # the shared-memory operands are partitioned per warpgroup, the register tensors per thread
        wg_slice = cute.make_layout(2, stride=_FWC_WG_THREADS)(wg)
        thr_qk = mma_qk.get_slice(wg_slice)
        thr_pv = mma_pv.get_slice(wg_slice)
        tSrQ = mma_qk.make_fragment_A(thr_qk.partition_A(sQ))
        tSrK = mma_qk.make_fragment_B(thr_qk.partition_B(sK))
        tOrVt = mma_pv.make_fragment_B(thr_pv.partition_B(sVt))
        acc_s = cute.make_rmem_tensor(thr_qk.partition_shape_C((_SM90_BM, bn)), cutlass.Float32)
        acc_o = cute.make_rmem_tensor(thr_pv.partition_shape_C((_SM90_BM, d)), cutlass.Float32)
        # P's register A operand, and S's accumulators viewed in its shape: both compact, so A element i is S
        # element i (the same (row, column): the fragments agree, tests/solutions/test_wgmma_prefill_cute.py)
        r_p = cute.make_rmem_tensor(thr_pv.partition_shape_A((_SM90_BM, bn)), cutlass.BFloat16)
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
            m0 = mblk * _SM90_BM
            nrows = cutlass.min(lq - m0, _SM90_BM)
            delta = lk - lq  # query i sees KV tokens j <= i + delta
            ntile = (m0 + nrows + delta + bn - 1) // bn
            row0 = wg * _SM90_WG_ROWS + warp * 16  # first tile row of this thread's warp

            # the row lists of the tiles the copies before tile 1's barrier read
            for i in cutlass.range_constexpr(ka + 1):
                self.fill_rows(sRows, mTable, kv0, lk, i, ntile)
            cute.arch.sync_threads()
            for i in cutlass.range_constexpr(t.q_loads):
                r = _FP_copy_row(tidx, i, t.row_step, chunks)
                cute.copy(
                    g2s,
                    gQ[(0, 0, None), (q0 + cutlass.min(m0 + r, lq - 1), h, cc)],
                    sQc[(None,), (_SM90_panel_chunk(r, cc, _SM90_BM),)],
                )
            # the copies of the walk tiles -k_ahead .. -1 (before the walk): V's group (Q joins the first), K's
            for i in cutlass.range_constexpr(-ka, 0):
                if cutlass.const_expr(i + va >= 0):
                    self.copy_tile(g2s, sVc, vr, gV, sRows, kvh, i + va, ntile)
                else:
                    cute.arch.cp_async_commit_group()
                self.copy_tile(g2s, sKc, kr, gK, sRows, kvh, i + ka, ntile)
            m_run.fill(_FP_NEG_BIG)
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
                row = row0 + _FP_acc_row(lane, 2 * hf)
                if lane % 4 == 0:  # noqa: SIM102 (dynamic conditions, one per if)
                    if row < nrows:
                        mLse[q0 + m0 + row, h] = m_run[hf] + cute.math.log2(total)
            for jt in cutlass.range_constexpr(d // 8):
                for c in cutlass.range_constexpr(4):
                    row = row0 + _FP_acc_row(lane, c)
                    sQf[_SM90_panel_chunk(row, jt, _SM90_BM) * 8 + _FP_acc_col(lane, c)] = (
                        acc_o[jt * 4 + c] * alpha[c // 2]
                    ).to(cutlass.BFloat16)
            cute.arch.sync_threads()
            for i in cutlass.range_constexpr(t.q_loads):
                r = _FP_copy_row(tidx, i, t.row_step, chunks)
                if r < nrows:
                    cute.autovec_copy(sQc[(None,), (_SM90_panel_chunk(r, cc, _SM90_BM),)], out8)
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
                    ntb = (mQO[b + 1] - mQO[b] + _SM90_BM - 1) // _SM90_BM
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
                        mblk = (mQO[seq + 1] - mQO[seq] + _SM90_BM - 1) // _SM90_BM - 1 - rank
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
        mma, _ = _FWC_tiled_mmas(self.t)
        mma.set(warpgroup.Field.ACCUMULATE, False)
        for kk in cutlass.range_constexpr(self.t.d // 16):
            cute.gemm(mma, acc, a[None, None, kk, 0], b[None, None, kk, j % ring], acc)
            mma.set(warpgroup.Field.ACCUMULATE, True)
        warpgroup.commit_group()

    @cute.jit
    def issue_pv(self, acc: cute.Tensor, p: cute.Tensor, vt: cute.Tensor, j, ring: int):
        # O += P(j) V(j) over bn / 16 k-steps, V(j) in ring buffer j % ring (an MMA of its own, as in issue_s)
        _, mma = _FWC_tiled_mmas(self.t)
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
                    if n * bn + jt * 8 + _FP_acc_col(lane, c) > q_row0 + _FP_acc_row(lane, c) + delta:
                        acc[jt * 4 + c] = cutlass.Float32(_FP_NEG_BIG)
        for hf in cutlass.range_constexpr(2):
            mx = m_run[hf]
            for jt in cutlass.range_constexpr(bn // 8):
                for e in cutlass.range_constexpr(2):
                    mx = cute.arch.fmax(mx, acc[jt * 4 + 2 * hf + e])
            mx = cute.arch.warp_reduction_max(mx, threads_in_group=4)
            # a row with every logit masked so far keeps p = 0 (2^(-3e38 - 0))
            m_use = cutlass.select_(mx == cutlass.Float32(_FP_NEG_BIG), cutlass.Float32(0.0), mx)
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
        q_layout, k_layout, v_layout = _FWC_smem_layouts(self.t, self.k_ring, self.v_ring)
        total_q = cute.size(mQ, mode=[0])
        batch = cute.size(mQO, mode=[0]) - 1
        tiles = (total_q + _SM90_BM - 1) // _SM90_BM + batch
        self.kernel(mQ, mK, mV, mQO, mKVP, mTable, mLast, mO, mLse, scale2, q_layout, k_layout, v_layout).launch(
            grid=[tiles * self.t.hq, 1, 1], block=[_SM90_THREADS, 1, 1]
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
            float(sm_scale) * _FWC_LOG2E,
        )
        return out, lse


FWC = SimpleNamespace(
    LOG2E=_FWC_LOG2E,
    WG_THREADS=_FWC_WG_THREADS,
    ROW_LISTS=_FWC_ROW_LISTS,
    SMEM_LIMIT=_FWC_SMEM_LIMIT,
    tiled_mmas=_FWC_tiled_mmas,
    smem_layouts=_FWC_smem_layouts,
    transposed=_FWC_transposed,
    FlashPrefillWgmma=_FWC_FlashPrefillWgmma,
)


# problems/attention/solutions/_flash_prefill_wgmmalean_cutedsl.py
_FWL_CHAINS = 4  # independent partial reductions per row half


class _FWL_FlashPrefillWgmmaLean(FWC.FlashPrefillWgmma):
    """`FlashPrefillWgmma` (same constructor: tiling and copy distances) whose softmax folds the scale into the
    exponent's multiply-add and reduces in `CHAINS` partial chains."""

    @cute.jit
    def softmax(self, acc, m_run, l_run, alpha, scale2, n, q_row0, delta, lane):
        # S of KV tile n has landed: mask raw logits, exponentiate c·s - m in place (P in fp32); alpha rescales O.
        # Both branches end in `exponentiate`: the join after them is where the caller's wait for P(j-1)·V(j-1)
        # starts its basic block, so ptxas cannot hoist that wait above the exponentials
        if (n + 1) * self.t.bn > q_row0 + delta + 1:  # the tile crosses the causal diagonal of the warp's first row
            self.mask(acc, n, q_row0, delta, lane)
            self.exponentiate(acc, m_run, l_run, alpha, scale2)
        else:
            self.exponentiate(acc, m_run, l_run, alpha, scale2)

    @cute.jit
    def mask(self, acc, n, q_row0, delta, lane):
        # logits of KV tile n past a row's causal limit become -3e38
        bn = self.t.bn
        for jt in cutlass.range_constexpr(bn // 8):
            for c in cutlass.range_constexpr(4):
                if n * bn + jt * 8 + _FP_acc_col(lane, c) > q_row0 + _FP_acc_row(lane, c) + delta:
                    acc[jt * 4 + c] = cutlass.Float32(_FP_NEG_BIG)

    @cute.jit
    def exponentiate(self, acc, m_run, l_run, alpha, scale2):
        # the online softmax step on raw (masked) logits: running max and sum, P = 2^(c·s - m) in place
        bn = self.t.bn
        per_chain = bn // 8 // _FWL_CHAINS
        for hf in cutlass.range_constexpr(2):
            # register 4·jt + 2·hf + e holds this half's logit of n8 tile jt; chain k takes tiles k, k + CHAINS, ..
            part = [acc[4 * k + 2 * hf] for k in range(_FWL_CHAINS)]
            for k in cutlass.range_constexpr(_FWL_CHAINS):
                for i in cutlass.range_constexpr(per_chain):
                    for e in cutlass.range_constexpr(2):
                        if cutlass.const_expr(i > 0 or e > 0):
                            part[k] = cute.arch.fmax(part[k], acc[(i * _FWL_CHAINS + k) * 4 + 2 * hf + e])
            raw = cute.arch.fmax(cute.arch.fmax(part[0], part[1]), cute.arch.fmax(part[2], part[3]))
            raw = cute.arch.warp_reduction_max(raw, threads_in_group=4)
            tile_max = cutlass.select_(raw == cutlass.Float32(_FP_NEG_BIG), cutlass.Float32(_FP_NEG_BIG), raw * scale2)
            mx = cute.arch.fmax(m_run[hf], tile_max)
            # a row with every logit masked so far keeps p = 0 (2^(c·-3e38 - 0))
            m_use = cutlass.select_(mx == cutlass.Float32(_FP_NEG_BIG), cutlass.Float32(0.0), mx)
            alpha[hf] = cute.math.exp2(m_run[hf] - m_use, fastmath=True)
            sums = [cutlass.Float32(0.0) for _ in range(_FWL_CHAINS)]
            for k in cutlass.range_constexpr(_FWL_CHAINS):
                for i in cutlass.range_constexpr(per_chain):
                    for e in cutlass.range_constexpr(2):
                        r = (i * _FWL_CHAINS + k) * 4 + 2 * hf + e
                        p = cute.math.exp2(acc[r] * scale2 - m_use, fastmath=True)
                        acc[r] = p
                        sums[k] = sums[k] + p
            l_run[hf] = l_run[hf] * alpha[hf] + ((sums[0] + sums[1]) + (sums[2] + sums[3]))
            m_run[hf] = mx


FWL = SimpleNamespace(
    CHAINS=_FWL_CHAINS,
    FlashPrefillWgmmaLean=_FWL_FlashPrefillWgmmaLean,
)


# problems/attention/solutions/_flash_prefill_fa3_cutedsl.py
_FA3_WG_THREADS = FWC.WG_THREADS
_FA3_CTA_THREADS = 3 * _FA3_WG_THREADS  # producer + two consumers
_FA3_CONSUMER_THREADS = 2 * _FA3_WG_THREADS
# 128·56 + 256·224 = 64512 registers, the 384-thread CTA's 168 each. The producer holds one tile's 16 row indices
# and addresses: at 40 registers it spills at page size 64 (the page and slot of each row); the consumers' SASS
# uses up to R221 (plan wgmmalean's loop)
_FA3_PRODUCER_REGS = 56
_FA3_CONSUMER_REGS = 224
_FA3_SCHED = (1, 2)  # named barriers: consumer c's turn to issue MMAs (0 is the CTA barrier)
_FA3_EPILOGUE = 3  # named barrier of the 256 consumer threads around the output tile in shared memory
_FA3_CONSUMER_WARPS = _FA3_CONSUMER_THREADS // 32  # arrivals on an `empty` barrier


def _FA3_chunks_of(ptr: Any, elements: int) -> Any:
    """The flat 16-byte chunk view ((8,), (chunks,)) of ``elements`` bf16 at ``ptr`` that copies address."""
    return cute.zipped_divide(cute.make_tensor(ptr, cute.make_layout((elements,))), (8,))


class _FA3_FlashPrefillFa3(FWL.FlashPrefillWgmmaLean):
    """Plan `fa3` for one `Sm90Tiling`: rings of ``k_stages`` K and ``v_stages`` V tiles filled by a producer
    warpgroup; ``__call__`` as `FlashPrefillWgmma`'s."""

    def __init__(self, tiling: _SM90_Sm90Tiling, k_stages: int, v_stages: int) -> None:
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
        return (_SM90_BM + (self.k_ring + self.v_ring) * t.bn) * t.d * 2 + 1024

    def storage(self) -> Any:
        """Shared memory: Q tile, K ring, V ring (1024-byte aligned for the swizzle), the mbarriers."""
        t, k_ring, v_ring, nbar = self.t, self.k_ring, self.v_ring, self.barriers

        @cute.struct
        class Storage:
            sq: cute.struct.Align[cute.struct.MemRange[cutlass.BFloat16, _SM90_BM * t.d], 1024]
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
        m0 = mblk * _SM90_BM
        nrows = cutlass.min(lq - m0, _SM90_BM)
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
            r = _FP_copy_row(ptid, i, _FA3_WG_THREADS // t.chunks, t.chunks)
            dst = slot * t.bn * t.chunks + _SM90_panel_chunk(r, cc, t.bn)
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
        wg = cute.arch.make_warp_uniform(tidx // _FA3_WG_THREADS)
        lane = tidx % 32

        storage = SmemAllocator().allocate(self.storage())
        k_bars = storage.bars.data_ptr()  # K full [0, kr), K empty [kr, 2 kr), then V's likewise
        v_bars = k_bars + 2 * kr
        if tidx == 0:
            for i in cutlass.range_constexpr(kr):
                cute.arch.mbarrier_init(k_bars + i, _FA3_WG_THREADS)
                cute.arch.mbarrier_init(k_bars + kr + i, _FA3_CONSUMER_WARPS)
            for i in cutlass.range_constexpr(vr):
                cute.arch.mbarrier_init(v_bars + i, _FA3_WG_THREADS)
                cute.arch.mbarrier_init(v_bars + vr + i, _FA3_CONSUMER_WARPS)
            cute.arch.mbarrier_init_fence()
        cute.arch.sync_threads()

        sQc = _FA3_chunks_of(storage.sq.data_ptr(), _SM90_BM * d)
        seq, mblk = self.cta_tile(mQO, bid // hq)
        if wg == 0:
            cute.arch.setmaxregister_decrease(_FA3_PRODUCER_REGS)
            if seq >= 0:
                q0, lq, kv0, lk, m0, nrows, delta, ntile = self.walk(mQO, mKVP, mLast, seq, mblk)
                sKc = _FA3_chunks_of(storage.sk.data_ptr(), kr * bn * d)
                sVc = _FA3_chunks_of(storage.sv.data_ptr(), vr * bn * d)
                g2s = cute.make_copy_atom(
                    cpasync.CopyG2SOp(cache_mode=cpasync.LoadCacheMode.GLOBAL), cutlass.BFloat16, num_bits_per_copy=128
                )
                gQ = cute.zipped_divide(mQ, (1, 1, 8))
                gK = cute.zipped_divide(mK, (1, 1, 8))
                gV = cute.zipped_divide(mV, (1, 1, 8))
                step = _FA3_WG_THREADS // chunks  # rows one pass of the producer's copies covers
                cc = tidx % chunks
                for i in cutlass.range_constexpr(_SM90_BM // step):
                    r = _FP_copy_row(tidx, i, step, chunks)
                    cute.copy(
                        g2s,
                        gQ[(0, 0, None), (q0 + cutlass.min(m0 + r, lq - 1), h, cc)],
                        sQc[(None,), (_SM90_panel_chunk(r, cc, _SM90_BM),)],
                    )
                for j in cutlass.range(ntile, unroll=1):
                    # pool rows of walk tile j (KV tile ntile - 1 - j; rows past the end re-read the last token)
                    base = (ntile - 1 - j) * bn
                    rows = [
                        _FP_kv_row(mTable, kv0, cutlass.min(base + _FP_copy_row(tidx, i, step, chunks), lk - 1), page)
                        for i in range(bn // step)
                    ]
                    self.produce(g2s, sKc, kr, k_bars, gK, rows, kvh, j)
                    self.produce(g2s, sVc, vr, v_bars, gV, rows, kvh, j)
                # the copies land before this thread exits (the consumers wait for them anyway)
                cute.arch.cp_async_commit_group()
                cute.arch.cp_async_wait_group(0)
        else:
            cute.arch.setmaxregister_increase(_FA3_CONSUMER_REGS)
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
        ctid = tidx - _FA3_WG_THREADS  # 0 .. 255 over both consumers
        warp = ctid % _FA3_WG_THREADS // 32
        cc = ctid % chunks
        mine, other = cutlass.Int32(_FA3_SCHED[0]) + c, cutlass.Int32(_FA3_SCHED[1]) - c
        mma_qk, mma_pv = FWC.tiled_mmas(t)
        sQf = cute.make_tensor(storage.sq.data_ptr(), cute.make_layout((_SM90_BM * d,)))
        sQ = storage.sq.get_tensor(q_layout.outer, swizzle=q_layout.inner)
        sK = storage.sk.get_tensor(k_layout.outer, swizzle=k_layout.inner)
        sVt = FWC.transposed(storage.sv.get_tensor(v_layout.outer, swizzle=v_layout.inner), t, vr)
        gO = cute.zipped_divide(mO, (1, 1, 8))

        wg_slice = cute.make_layout(2, stride=_FA3_WG_THREADS)(c)
        thr_qk = mma_qk.get_slice(wg_slice)
        thr_pv = mma_pv.get_slice(wg_slice)
        tSrQ = mma_qk.make_fragment_A(thr_qk.partition_A(sQ))
        tSrK = mma_qk.make_fragment_B(thr_qk.partition_B(sK))
        tOrVt = mma_pv.make_fragment_B(thr_pv.partition_B(sVt))
        acc_s = cute.make_rmem_tensor(thr_qk.partition_shape_C((_SM90_BM, bn)), cutlass.Float32)
        acc_o = cute.make_rmem_tensor(thr_pv.partition_shape_C((_SM90_BM, d)), cutlass.Float32)
        r_p = cute.make_rmem_tensor(thr_pv.partition_shape_A((_SM90_BM, bn)), cutlass.BFloat16)
        p_view = cute.make_tensor(acc_s.iterator, r_p.layout)
        m_run = cute.make_rmem_tensor((2,), cutlass.Float32)
        l_run = cute.make_rmem_tensor((2,), cutlass.Float32)
        alpha = cute.make_rmem_tensor((2,), cutlass.Float32)
        out8 = cute.make_rmem_tensor((8,), cutlass.BFloat16)
        row0 = c * _SM90_WG_ROWS + warp * 16  # first tile row of this thread's warp
        m_run.fill(_FP_NEG_BIG)
        l_run.fill(0.0)
        acc_o.fill(0.0)
        if c == 1:
            cute.arch.barrier_arrive(barrier_id=_FA3_SCHED[0], number_of_threads=_FA3_CONSUMER_THREADS)

        # walk tile 0: S(0) (its `full` covers Q too)
        self.acquire(k_bars, kr, 0)
        cute.arch.barrier(barrier_id=mine, number_of_threads=_FA3_CONSUMER_THREADS)
        warpgroup.fence()
        self.issue_s(acc_s, tSrQ, tSrK, 0, kr)
        cute.arch.barrier_arrive(barrier_id=other, number_of_threads=_FA3_CONSUMER_THREADS)
        warpgroup.wait_group(0)
        self.release(k_bars, kr, 0, lane)
        self.softmax(acc_s, m_run, l_run, alpha, scale2, ntile - 1, m0 + row0, delta, lane)
        r_p.store(p_view.load().to(cutlass.BFloat16))
        for j in cutlass.range(1, ntile, unroll=1):
            self.acquire(k_bars, kr, j)
            self.acquire(v_bars, vr, j - 1)
            cute.arch.barrier(barrier_id=mine, number_of_threads=_FA3_CONSUMER_THREADS)
            warpgroup.fence()
            self.issue_s(acc_s, tSrQ, tSrK, j, kr)
            self.issue_pv(acc_o, r_p, tOrVt, j - 1, vr)
            cute.arch.barrier_arrive(barrier_id=other, number_of_threads=_FA3_CONSUMER_THREADS)
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
        cute.arch.barrier(barrier_id=mine, number_of_threads=_FA3_CONSUMER_THREADS)
        warpgroup.fence()
        self.issue_pv(acc_o, r_p, tOrVt, ntile - 1, vr)
        if c == 0:
            cute.arch.barrier_arrive(barrier_id=other, number_of_threads=_FA3_CONSUMER_THREADS)
        warpgroup.wait_group(0)
        self.release(v_bars, vr, ntile - 1, lane)

        # epilogue: each consumer writes only its own 64 rows of sQ, which only its own wgmma read
        for hf in cutlass.range_constexpr(2):
            total = cute.arch.warp_reduction_sum(l_run[hf], threads_in_group=4)
            alpha[hf] = cutlass.Float32(1.0) / total
            row = row0 + _FP_acc_row(lane, 2 * hf)
            if lane % 4 == 0:  # noqa: SIM102 (dynamic conditions, one per if)
                if row < nrows:
                    mLse[q0 + m0 + row, h] = m_run[hf] + cute.math.log2(total)
        for jt in cutlass.range_constexpr(d // 8):
            for e in cutlass.range_constexpr(4):
                row = row0 + _FP_acc_row(lane, e)
                sQf[_SM90_panel_chunk(row, jt, _SM90_BM) * 8 + _FP_acc_col(lane, e)] = (
                    acc_o[jt * 4 + e] * alpha[e // 2]
                ).to(cutlass.BFloat16)
        cute.arch.barrier(barrier_id=_FA3_EPILOGUE, number_of_threads=_FA3_CONSUMER_THREADS)
        for i in cutlass.range_constexpr(t.q_loads):
            r = _FP_copy_row(ctid, i, t.row_step, chunks)
            if r < nrows:
                cute.autovec_copy(sQc[(None,), (_SM90_panel_chunk(r, cc, _SM90_BM),)], out8)
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
        tiles = (total_q + _SM90_BM - 1) // _SM90_BM + batch
        self.kernel(mQ, mK, mV, mQO, mKVP, mTable, mLast, mO, mLse, scale2, q_layout, k_layout, v_layout).launch(
            grid=[tiles * self.t.hq, 1, 1], block=[_FA3_CTA_THREADS, 1, 1]
        )


FA3 = SimpleNamespace(
    WG_THREADS=_FA3_WG_THREADS,
    CTA_THREADS=_FA3_CTA_THREADS,
    CONSUMER_THREADS=_FA3_CONSUMER_THREADS,
    PRODUCER_REGS=_FA3_PRODUCER_REGS,
    CONSUMER_REGS=_FA3_CONSUMER_REGS,
    SCHED=_FA3_SCHED,
    EPILOGUE=_FA3_EPILOGUE,
    CONSUMER_WARPS=_FA3_CONSUMER_WARPS,
    chunks_of=_FA3_chunks_of,
    FlashPrefillFa3=_FA3_FlashPrefillFa3,
)

# ---- end of bundle ----


_PREFILL = FA3.FlashPrefillFa3(SM90.Sm90Tiling(hq=24, hkv=8, d=128, page=64), k_stages=3, v_stages=3)


def _compiled():
    return _PREFILL.compiled()


def run(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    kv_last_page_len: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    return _PREFILL(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, sm_scale)
