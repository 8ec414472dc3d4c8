"""p05 gqa_paged_prefill_causal_h5_kv1_d128_ps1_bf16 — plan `fa3`, TIRx: flash attention (WGMMA).

Plan: FlashAttention-3's CTA structure (`_flash_prefill_fa3_tirx.py`, inlined in this file; the CuTe DSL twin is
`05_fa3_cutedsl.py`): a producer warpgroup copies Q and K/V tiles through the page table with cp.async into rings of
three K and three V tiles, tracked by mbarriers (no CTA barrier per KV tile), and two consumer warpgroups of 64
query rows each run plan `wgmma`'s tile loop (S(j) = Q·K(j)ᵀ and O += P(j-1)·V(j-1) on wgmma, the softmax of S(j)
under P(j-1)·V(j-1)), ping-ponging through named barriers so one's softmax runs under the other's MMAs; `setmaxnreg`
moves registers from the producer to the consumers. Instantiated for 5 query / 1 KV heads, head dim 128, page size
1. Compute-bound: 32 GFLOP of bf16 matmul at WORKLOAD.
"""

import math
from types import SimpleNamespace

import torch
import tvm
from tvm.script import tirx as T

# bundle: problems/attention/solutions/_flash_prefill.py as FP
# bundle: problems/attention/solutions/_flash_prefill_sm90.py as SM90
# bundle: problems/attention/solutions/_flash_prefill_wgmma_tirx.py as FW
# bundle: problems/attention/solutions/_flash_prefill_fa3_tirx.py as FA3

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


# problems/attention/solutions/_flash_prefill_wgmma_tirx.py
_FW_LOG2E = 1.0 / math.log(2.0)
# wgmma m64nNk16 (bf16 in, fp32 accumulate) by N: spelled out, since a PTX string or a computed attribute name
# would not pass the verifier's static scan
_FW_WGMMA_BF16 = {
    64: T.ptx.wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16,
    128: T.ptx.wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16,
    256: T.ptx.wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16,
}

_FW_ShapeKey = tuple[int, int, int, int, int]


class _FW_FlashPrefillSm90:
    """The template for one `Sm90Tiling`; ``__call__`` runs it on (q, k, v, qo_indptr, kv_indptr, table, last)."""

    def __init__(self, tiling: _SM90_Sm90Tiling) -> None:
        self.t = tiling
        self._kernels: dict[_FW_ShapeKey, tvm.runtime.Module] = {}

    @staticmethod
    def shape_key(
        q: torch.Tensor, k: torch.Tensor, qo_indptr: torch.Tensor, table: torch.Tensor, last: torch.Tensor
    ) -> _FW_ShapeKey:
        """(total_q, KV pool rows, batch, page-table length, last-page-length length)."""
        rows = k.shape[0] * (k.shape[1] if k.dim() == 4 else 1)
        return q.shape[0], rows, qo_indptr.shape[0] - 1, table.shape[0], last.shape[0]

    def build(self, total_q: int, kv_rows: int, batch: int, n_table: int, n_last: int) -> tvm.runtime.Module:
        t = self.t
        hq, hkv, group, d, page, bn = t.hq, t.hkv, t.group, t.d, t.page, t.bn
        chunks, row_step, kv_loads, q_loads = t.chunks, t.row_step, t.kv_loads, t.q_loads
        s_regs, o_regs = t.s_regs, t.o_regs
        k_steps = d // 16  # k-steps of S = Q K^T
        pv_steps = bn // 16  # k-steps of O += P V
        sbo = _SM90_ROWS_PER_GROUP_BYTES >> 4  # descriptor fields count 16-byte units
        v_lbo = _SM90_panel_bytes(bn) >> 4
        tile_bytes = bn * d * 2  # one K or V buffer
        grid = t.grid_tiles(total_q, batch) * hq
        mma_s, mma_o = _FW_WGMMA_BF16[bn], _FW_WGMMA_BF16[d]

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
            tx = T.thread_id([_SM90_THREADS])
            pool = T.SMEMPool()
            sq = pool.alloc((_SM90_BM * d,), "bfloat16", align=1024)
            sk = pool.alloc((2, bn * d), "bfloat16", align=1024)
            sv = pool.alloc((2, bn * d), "bfloat16", align=1024)
            srows = pool.alloc((4, bn), "int32", align=16)  # pool rows of walk tile j in srows[j % 4]
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
            h = T.meta_var(bid % hq)
            kvh = T.meta_var(bid % hq // group)
            wg = T.meta_var(tx // 128)
            warp = T.meta_var(tx % 128 // 32)  # warp of the warpgroup: its 16 rows of the m64 tile
            lane = T.meta_var(tx % 32)
            cc = T.meta_var(tx % chunks)  # the 16-byte chunk this thread copies in every row

            @T.inline
            def fill_rows(j, kv0, lk, ntile):
                # pool rows of walk tile j (KV tile ntile - 1 - j), one thread a token
                if j < ntile:  # noqa: SIM102 (TIR conditions, one per if)
                    if tx < bn:
                        srows[j % 4, tx] = _FP_kv_row(TABLE, kv0, T.min((ntile - 1 - j) * bn + tx, lk - 1), page)

            @T.inline
            def copy_tile(dst, src, j):
                for i in T.unroll(kv_loads):
                    r = T.meta_var(_FP_copy_row(tx, i, row_step, chunks))
                    T.ptx.cp.async_.cg.shared.global_(
                        dst.ptr_to([j % 2, _SM90_panel_chunk(r, cc, bn) * 8]),
                        src.ptr_to([srows[j % 4, r], kvh, cc * 8]),
                        16,
                    )

            @T.inline
            def publish():
                # this thread's copies landed; hand them to the async proxy wgmma reads through; then everyone's
                T.ptx.cp.async_.wait_group(0)
                T.ptx.fence.proxy.async_.shared__cta()
                T.cuda.cta_sync()

            @T.inline
            def issue_s(j):
                for kk in T.unroll(k_steps):
                    mma_s(
                        *[s[i] for i in range(s_regs)],
                        desc[0] + T.uint64(_SM90_k_major_step(kk, _SM90_BM) >> 4),
                        desc[1] + T.uint64((j % 2 * tile_bytes + _SM90_k_major_step(kk, bn)) >> 4),
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
                        desc[2] + T.uint64((j % 2 * tile_bytes + _SM90_mn_major_step(kk)) >> 4),
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
                            qi = T.meta_var(m0 + wg * _SM90_WG_ROWS + warp * 16 + _FP_acc_row(lane, c))
                            if n * bn + jt * 8 + _FP_acc_col(lane, c) > qi + delta:
                                s[jt * 4 + c] = T.float32(_FP_NEG_BIG)
                for hf in T.unroll(2):
                    mx: T.float32 = m_run[hf]
                    for jt in T.unroll(bn // 8):
                        for e in T.unroll(2):
                            mx = T.max(mx, s[jt * 4 + 2 * hf + e])
                    mx = T.cuda.warp_max(mx, width=4)
                    # a row with every logit masked so far keeps p = 0 (2^(-3e38 - 0))
                    m_use: T.float32 = T.Select(mx == T.float32(_FP_NEG_BIG), T.float32(0), mx)
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
                ntb: T.int32 = (QO[b + 1] - QO[b] + _SM90_BM - 1) // _SM90_BM
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
                m0: T.int32 = mblk * _SM90_BM
                nrows: T.int32 = T.min(lq - m0, _SM90_BM)
                delta: T.int32 = lk - lq  # query i sees KV tokens j <= i + delta
                ntile: T.int32 = (m0 + nrows + delta + bn - 1) // bn
                # descriptors of buffer 0; buffer 1 is one tile further (the start address field adds)
                T.cuda.wgmma.encode_matrix_descriptor(
                    T.address_of(desc[0]), sq.ptr_to([wg * _SM90_WG_ROWS * 64]), 1, sbo, _SM90_SWIZZLE_128B
                )
                T.cuda.wgmma.encode_matrix_descriptor(
                    T.address_of(desc[1]), sk.ptr_to([0, 0]), 1, sbo, _SM90_SWIZZLE_128B
                )
                T.cuda.wgmma.encode_matrix_descriptor(
                    T.address_of(desc[2]), sv.ptr_to([0, 0]), v_lbo, sbo, _SM90_SWIZZLE_128B
                )
                fill_rows(0, kv0, lk, ntile)
                fill_rows(1, kv0, lk, ntile)
                T.cuda.cta_sync()
                for i in T.unroll(q_loads):
                    r = T.meta_var(_FP_copy_row(tx, i, row_step, chunks))
                    T.ptx.cp.async_.cg.shared.global_(
                        sq.ptr_to([_SM90_panel_chunk(r, cc, _SM90_BM) * 8]),
                        Q.ptr_to([q0 + T.min(m0 + r, lq - 1), h, cc * 8]),
                        16,
                    )
                copy_tile(sk, K, 0)
                T.ptx.cp.async_.commit_group()
                for hf in T.unroll(2):
                    m_run[hf] = T.float32(_FP_NEG_BIG)
                    l_run[hf] = T.float32(0)
                for i in T.unroll(o_regs):
                    o[i] = T.float32(0)
                for i in T.unroll(s_regs):
                    s[i] = T.float32(0)  # defined inputs for the first S product (which ignores them)
                publish()
                # walk tile 0: S(0), then the copies of K(1) and V(0) run under its softmax
                T.ptx.wgmma.fence.sync.aligned()
                issue_s(0)
                fill_rows(2, kv0, lk, ntile)
                if ntile > 1:
                    copy_tile(sk, K, 1)
                copy_tile(sv, V, 0)
                T.ptx.cp.async_.commit_group()
                T.ptx.wgmma.wait_group.sync.aligned(0)
                softmax(0, m0, delta, ntile)
                for j in T.serial(1, ntile):
                    for i in T.unroll(s_regs):
                        p_cur[i] = p_new[i]
                    # K(j) and V(j-1) landed; every warpgroup is done with K(j-1), V(j-2) and row list j-2
                    publish()
                    T.ptx.wgmma.fence.sync.aligned()
                    issue_s(j)
                    issue_pv(j - 1)
                    fill_rows(j + 2, kv0, lk, ntile)
                    if j + 1 < ntile:
                        copy_tile(sk, K, j + 1)
                    copy_tile(sv, V, j)
                    T.ptx.cp.async_.commit_group()
                    T.ptx.wgmma.wait_group.sync.aligned(1)
                    softmax(j, m0, delta, ntile)
                    T.ptx.wgmma.wait_group.sync.aligned(0)
                    rescale_o()
                # the last product: P(ntile-1) V(ntile-1)
                for i in T.unroll(s_regs):
                    p_cur[i] = p_new[i]
                publish()
                T.ptx.wgmma.fence.sync.aligned()
                issue_pv(ntile - 1)
                T.ptx.wgmma.wait_group.sync.aligned(0)
                # epilogue: each warpgroup writes only its own 64 rows of sq, which only its own wgmma read
                for hf in T.unroll(2):
                    row = T.meta_var(wg * _SM90_WG_ROWS + warp * 16 + _FP_acc_row(lane, 2 * hf))
                    total: T.float32 = T.cuda.warp_sum(l_run[hf], width=4)
                    alpha[hf] = T.float32(1) / total
                    if lane % 4 == 0 and row < nrows:
                        LSE[q0 + m0 + row, h] = m_run[hf] + T.log2(total)
                rescale_o()
                for jt in T.unroll(d // 8):
                    for c in T.unroll(4):
                        row = T.meta_var(wg * _SM90_WG_ROWS + warp * 16 + _FP_acc_row(lane, c))
                        sq[_SM90_panel_chunk(row, jt, _SM90_BM) * 8 + _FP_acc_col(lane, c)] = T.Cast(
                            "bfloat16", o[jt * 4 + c]
                        )
                T.cuda.cta_sync()
                for i in T.unroll(q_loads):
                    r = T.meta_var(_FP_copy_row(tx, i, row_step, chunks))
                    if r < nrows:
                        for e in T.vectorized(8):
                            OUT[q0 + m0 + r, h, cc * 8 + e] = sq[_SM90_panel_chunk(r, cc, _SM90_BM) * 8 + e]

        mod = tvm.IRModule({"main": prefill})
        return tvm.compile(mod, target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")

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
        key = self.shape_key(q, k, qo_indptr, table, last)
        kernel = self._kernels.get(key)
        if kernel is None:
            kernel = self._kernels[key] = self.build(*key)
        rows = key[1]
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
            float(sm_scale) * _FW_LOG2E,
        )
        return out, lse


FW = SimpleNamespace(
    LOG2E=_FW_LOG2E,
    WGMMA_BF16=_FW_WGMMA_BF16,
    ShapeKey=_FW_ShapeKey,
    FlashPrefillSm90=_FW_FlashPrefillSm90,
)


# problems/attention/solutions/_flash_prefill_fa3_tirx.py
_FA3_WG_THREADS = 128
_FA3_CTA_THREADS = 3 * _FA3_WG_THREADS  # producer + two consumers
_FA3_CONSUMER_THREADS = 2 * _FA3_WG_THREADS
_FA3_CONSUMER_WARPS = _FA3_CONSUMER_THREADS // 32  # arrivals on an `empty` barrier
# setmaxnreg's (producer, consumer) registers by head dim: 128·p + 256·c = 64512, the 384-thread CTA's 168 each
# (ptxas's cap at __launch_bounds__(384)). At 128 the producer keeps 16 table-derived rows a tile (at 40 it spills at
# page size 64); at 256 the consumers hold a 64 x 256 fp32 O and spill at 224 (SASS: up to R229 at 232)
_FA3_REGS_BY_HEAD_DIM = {128: (56, 224), 256: (40, 232)}
_FA3_SCHED = (1, 2)  # named barriers: consumer c's turn to issue MMAs (0 is the CTA barrier)
_FA3_EPILOGUE = 3  # named barrier of the 256 consumer threads around the output tile in shared memory
_FA3_SMEM_LIMIT = 232448  # bytes of shared memory one CTA may opt into on sm_90 (227 KB)


def _FA3_producer_step(t: _SM90_Sm90Tiling) -> int:
    """Tile rows one pass of the producer's 16-byte copies covers (a thread copies one chunk a row)."""
    return _FA3_WG_THREADS // t.chunks


class _FA3_FlashPrefillFa3(_FW_FlashPrefillSm90):
    """Plan `fa3` for one `Sm90Tiling`: rings of ``k_stages`` K and ``v_stages`` V tiles filled by a producer
    warpgroup (`shape_key` and ``__call__`` as `FlashPrefillSm90`'s)."""

    def __init__(self, tiling: _SM90_Sm90Tiling, k_stages: int, v_stages: int) -> None:
        if k_stages < 2 or v_stages < 2:
            raise ValueError(f"a ring needs two buffers to overlap copies: k_stages={k_stages} v_stages={v_stages}")
        super().__init__(tiling)
        self.k_ring, self.v_ring = k_stages, v_stages
        need, limit = self.smem_bytes, _FA3_SMEM_LIMIT  # (a module constant in an f-string would not bundle)
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
        return (_SM90_BM + (self.k_ring + self.v_ring) * t.bn) * t.d * 2 + 8 * self.barriers

    def build(self, total_q: int, kv_rows: int, batch: int, n_table: int, n_last: int) -> tvm.runtime.Module:
        t = self.t
        hq, hkv, group, d, page, bn = t.hq, t.hkv, t.group, t.d, t.page, t.bn
        chunks, s_regs, o_regs = t.chunks, t.s_regs, t.o_regs
        kr, vr = self.k_ring, self.v_ring
        step = _FA3_producer_step(t)
        producer_regs, consumer_regs = _FA3_REGS_BY_HEAD_DIM[d]
        p_rows = bn // step  # K/V rows a producer thread copies per tile
        p_q = _SM90_BM // step  # Q rows a producer thread copies
        k_full, k_empty, v_full, v_empty = 0, kr, 2 * kr, 2 * kr + vr  # first mbarrier of each set
        k_steps = d // 16  # k-steps of S = Q K^T
        pv_steps = bn // 16  # k-steps of O += P V
        sbo = _SM90_ROWS_PER_GROUP_BYTES >> 4  # descriptor fields count 16-byte units
        v_lbo = _SM90_panel_bytes(bn) >> 4
        tile_bytes = bn * d * 2  # one K or V buffer
        grid = t.grid_tiles(total_q, batch) * hq
        mma_s, mma_o = _FW_WGMMA_BF16[bn], _FW_WGMMA_BF16[d]

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
            tx = T.thread_id([_FA3_CTA_THREADS])
            pool = T.SMEMPool()
            sq = pool.alloc((_SM90_BM * d,), "bfloat16", align=1024)
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
            wg = T.meta_var(tx // _FA3_WG_THREADS)  # 0: the producer; 1, 2: consumers 0, 1
            c = T.meta_var(tx // _FA3_WG_THREADS - 1)
            ctid = T.meta_var(tx - _FA3_WG_THREADS)  # 0 .. 255 over both consumers
            warp = T.meta_var(tx % _FA3_WG_THREADS // 32)  # warp of the warpgroup: its 16 rows of the m64 tile
            lane = T.meta_var(tx % 32)
            cc = T.meta_var(tx % chunks)  # the 16-byte chunk a producer thread copies in every row
            cc_out = T.meta_var(ctid % chunks)  # the 16-byte chunk a consumer thread stores in every output row

            @T.inline
            def produce(dst, src, ring, full, empty, j):
                # walk tile j's K or V rows into buffer j % ring once both consumers released its previous tile;
                # the buffer's `full` fires when this thread's copies (and all before them) landed
                T.cuda.mbarrier_wait(bars.ptr_to([empty + j % ring]), (j // ring + 1) % 2)
                for i in T.unroll(p_rows):
                    r = T.meta_var(_FP_copy_row(tx, i, step, chunks))
                    T.ptx.cp.async_.cg.shared.global_(
                        dst.ptr_to([j % ring, _SM90_panel_chunk(r, cc, bn) * 8]),
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
                T.ptx.bar.sync(T.uint32(_FA3_SCHED[0]) + T.Cast("uint32", c), T.uint32(_FA3_CONSUMER_THREADS))

            @T.inline
            def pass_turn():
                T.ptx.bar.arrive(T.uint32(_FA3_SCHED[1]) - T.Cast("uint32", c), T.uint32(_FA3_CONSUMER_THREADS))

            @T.inline
            def issue_s(j):
                for kk in T.unroll(k_steps):
                    mma_s(
                        *[s[i] for i in range(s_regs)],
                        desc[0] + T.uint64(_SM90_k_major_step(kk, _SM90_BM) >> 4),
                        desc[1] + T.uint64((j % kr * tile_bytes + _SM90_k_major_step(kk, bn)) >> 4),
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
                        desc[2] + T.uint64((j % vr * tile_bytes + _SM90_mn_major_step(kk)) >> 4),
                        True, 1, 1, 1,
                    )  # fmt: skip
                T.ptx.wgmma.commit_group.sync.aligned()

            @T.inline
            def mask(n, m0, delta):
                # logits of KV tile n past a row's causal limit become -3e38
                for jt in T.unroll(bn // 8):
                    for e in T.unroll(4):
                        qi = T.meta_var(m0 + c * _SM90_WG_ROWS + warp * 16 + _FP_acc_row(lane, e))
                        if n * bn + jt * 8 + _FP_acc_col(lane, e) > qi + delta:
                            s[jt * 4 + e] = T.float32(_FP_NEG_BIG)

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
                    m_use: T.float32 = T.Select(mx == T.float32(_FP_NEG_BIG), T.float32(0), mx)
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
                    T.ptx.mbarrier.init.shared.b64(bars.ptr_to([k_full + i]), T.uint32(_FA3_WG_THREADS))
                    T.ptx.mbarrier.init.shared.b64(bars.ptr_to([k_empty + i]), T.uint32(_FA3_CONSUMER_WARPS))
                for i in T.unroll(vr):
                    T.ptx.mbarrier.init.shared.b64(bars.ptr_to([v_full + i]), T.uint32(_FA3_WG_THREADS))
                    T.ptx.mbarrier.init.shared.b64(bars.ptr_to([v_empty + i]), T.uint32(_FA3_CONSUMER_WARPS))
            T.cuda.cta_sync()
            # this CTA's (sequence, query tile): tiles of a sequence are numbered from its last one
            seq: T.int32 = -1
            mblk: T.int32 = 0
            rem: T.int32 = bid // hq
            for b in T.serial(batch):
                ntb: T.int32 = (QO[b + 1] - QO[b] + _SM90_BM - 1) // _SM90_BM
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
                m0: T.int32 = mblk * _SM90_BM
                nrows: T.int32 = T.min(lq - m0, _SM90_BM)
                delta: T.int32 = lk - lq  # query i sees KV tokens j <= i + delta
                ntile: T.int32 = (m0 + nrows + delta + bn - 1) // bn
                if wg == 0:
                    T.ptx.setmaxnreg.dec.sync.aligned.u32(producer_regs)
                    for i in T.unroll(p_q):
                        r = T.meta_var(_FP_copy_row(tx, i, step, chunks))
                        T.ptx.cp.async_.cg.shared.global_(
                            sq.ptr_to([_SM90_panel_chunk(r, cc, _SM90_BM) * 8]),
                            Q.ptr_to([q0 + T.min(m0 + r, lq - 1), h, cc * 8]),
                            16,
                        )
                    for j in T.serial(ntile):
                        # pool rows of walk tile j (KV tile ntile - 1 - j; rows past the end re-read the last token)
                        for i in T.unroll(p_rows):
                            token = T.meta_var((ntile - 1 - j) * bn + _FP_copy_row(tx, i, step, chunks))
                            prow[i] = _FP_kv_row(TABLE, kv0, T.min(token, lk - 1), page)
                        produce(sk, K, kr, k_full, k_empty, j)
                        produce(sv, V, vr, v_full, v_empty, j)
                    # the copies land before this thread exits (the consumers wait for them anyway)
                    T.ptx.cp.async_.commit_group()
                    T.ptx.cp.async_.wait_group(0)
                else:
                    T.ptx.setmaxnreg.inc.sync.aligned.u32(consumer_regs)
                    # descriptors of buffer 0; buffer b is b tiles further (the start address field adds)
                    T.cuda.wgmma.encode_matrix_descriptor(
                        T.address_of(desc[0]), sq.ptr_to([c * _SM90_WG_ROWS * 64]), 1, sbo, _SM90_SWIZZLE_128B
                    )
                    T.cuda.wgmma.encode_matrix_descriptor(
                        T.address_of(desc[1]), sk.ptr_to([0, 0]), 1, sbo, _SM90_SWIZZLE_128B
                    )
                    T.cuda.wgmma.encode_matrix_descriptor(
                        T.address_of(desc[2]), sv.ptr_to([0, 0]), v_lbo, sbo, _SM90_SWIZZLE_128B
                    )
                    for hf in T.unroll(2):
                        m_run[hf] = T.float32(_FP_NEG_BIG)
                        l_run[hf] = T.float32(0)
                    for i in T.unroll(o_regs):
                        o[i] = T.float32(0)
                    for i in T.unroll(s_regs):
                        s[i] = T.float32(0)  # defined inputs for the first S product (which ignores them)
                    if c == 1:
                        T.ptx.bar.arrive(T.uint32(_FA3_SCHED[0]), T.uint32(_FA3_CONSUMER_THREADS))
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
                        row = T.meta_var(c * _SM90_WG_ROWS + warp * 16 + _FP_acc_row(lane, 2 * hf))
                        total: T.float32 = T.cuda.warp_sum(l_run[hf], width=4)
                        alpha[hf] = T.float32(1) / total
                        if lane % 4 == 0 and row < nrows:
                            LSE[q0 + m0 + row, h] = m_run[hf] + T.log2(total)
                    rescale_o()
                    for jt in T.unroll(d // 8):
                        for e in T.unroll(4):
                            row = T.meta_var(c * _SM90_WG_ROWS + warp * 16 + _FP_acc_row(lane, e))
                            sq[_SM90_panel_chunk(row, jt, _SM90_BM) * 8 + _FP_acc_col(lane, e)] = T.Cast(
                                "bfloat16", o[jt * 4 + e]
                            )
                    T.ptx.bar.sync(T.uint32(_FA3_EPILOGUE), T.uint32(_FA3_CONSUMER_THREADS))
                    for i in T.unroll(t.q_loads):  # Sm90Tiling's row_step / q_loads count 256 threads: the consumers
                        r = T.meta_var(_FP_copy_row(ctid, i, t.row_step, chunks))
                        if r < nrows:
                            for e in T.vectorized(8):
                                OUT[q0 + m0 + r, h, cc_out * 8 + e] = sq[_SM90_panel_chunk(r, cc_out, _SM90_BM) * 8 + e]

        mod = tvm.IRModule({"main": prefill})
        return tvm.compile(mod, target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")


FA3 = SimpleNamespace(
    WG_THREADS=_FA3_WG_THREADS,
    CTA_THREADS=_FA3_CTA_THREADS,
    CONSUMER_THREADS=_FA3_CONSUMER_THREADS,
    CONSUMER_WARPS=_FA3_CONSUMER_WARPS,
    REGS_BY_HEAD_DIM=_FA3_REGS_BY_HEAD_DIM,
    SCHED=_FA3_SCHED,
    EPILOGUE=_FA3_EPILOGUE,
    SMEM_LIMIT=_FA3_SMEM_LIMIT,
    producer_step=_FA3_producer_step,
    FlashPrefillFa3=_FA3_FlashPrefillFa3,
)

# ---- end of bundle ----


_PREFILL = FA3.FlashPrefillFa3(SM90.Sm90Tiling(hq=5, hkv=1, d=128, page=1), k_stages=3, v_stages=3)


def _shape_key(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, qo_indptr: torch.Tensor, kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor, *_: object,
) -> tuple[int, int, int, int, int]:  # fmt: skip
    return _PREFILL.shape_key(q, k_cache, qo_indptr, kv_indices, kv_indptr)


def _build(*key: int):
    return _PREFILL.build(*key)


def run(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    # page size 1: every page is full, so kv_indptr fills the unused kv_last_page_len slot
    return _PREFILL(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, kv_indptr, sm_scale)
