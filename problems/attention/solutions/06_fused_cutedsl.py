"""p06 gqa_paged_prefill_causal_h24_kv8_d128_ps64_bf16 — plan `fused`, CuTe DSL: flash attention (mma.sync).

Plan: the shared CuTe DSL template (FlashAttention-2 forward; `_flash_prefill_cutedsl.py` and its
index math `_flash_prefill.py`, inlined in this file) instantiated for 24 query / 8 KV heads, head dim
128, page size 64. One CTA of 4 warps per (sequence, query tile of 64 rows, query head): a grid of 136 query
tiles at most x 24 heads, heads fastest so the 3 query heads of a KV head read its K/V tiles while they are in
L2. K/V tiles of 64 tokens (one tile = one page: one page-table read a tile) are copied with 16-byte cp.async
into swizzled shared memory (V(n) while Q·K(n)ᵀ runs, K(n-1) while the softmax and P·V(n) run); Q·Kᵀ and P·V on
mma.sync m16n8k16 (bf16 -> fp32) fed by ldmatrix.x4; base-2 online softmax in fp32 with the end-aligned causal
mask only on the tiles crossing the diagonal; O / l rounded to bf16 and written as 16-byte row stores; lse = m +
log2(l). Compute-bound: 151 GFLOP of bf16 matmul at WORKLOAD.
"""

import math
from types import SimpleNamespace

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.nvgpu import cpasync, warp
from cutlass.cute.runtime import make_fake_compact_tensor
from cutlass.memory.smem import SmemAllocator

# bundle: problems/attention/solutions/_flash_prefill.py as FP
# bundle: problems/attention/solutions/_flash_prefill_cutedsl.py as FC

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


# problems/attention/solutions/_flash_prefill_cutedsl.py
_FC_LOG2E = 1.0 / math.log(2.0)


@cute.jit
def _FC__quad_max(x: cutlass.Float32) -> cutlass.Float32:
    # the 4 lanes of a quad hold one accumulator row
    x = cute.arch.fmax(x, cute.arch.shuffle_sync_bfly(x, offset=2))
    return cute.arch.fmax(x, cute.arch.shuffle_sync_bfly(x, offset=1))


@cute.jit
def _FC__quad_sum(x: cutlass.Float32) -> cutlass.Float32:
    x = x + cute.arch.shuffle_sync_bfly(x, offset=2)
    return x + cute.arch.shuffle_sync_bfly(x, offset=1)


class _FC_FlashPrefill:
    """The template for one `Tiling`; ``__call__`` runs it on (q, k, v, qo_indptr, kv_indptr, table, last)."""

    def __init__(self, tiling: _FP_Tiling) -> None:
        self.t = tiling
        self._kernel: list = []

    # --- device code -------------------------------------------------------------------------------
    @cute.jit
    def fill_rows(self, sRows: cute.Tensor, mTable: cute.Tensor, kv0, lk, n):
        # pool rows of tile n, one thread a token; tokens past the KV end re-read the last one
        tidx, _, _ = cute.arch.thread_idx()
        if tidx < _FP_BN:
            sRows[n % 2, tidx] = _FP_kv_row(mTable, kv0, cutlass.min(n * _FP_BN + tidx, lk - 1), self.t.page)

    @cute.jit
    def copy_tile(self, atom: cute.CopyAtom, sDst: cute.Tensor, gSrc: cute.Tensor, sRows: cute.Tensor, kvh, n):
        t = self.t
        tidx, _, _ = cute.arch.thread_idx()
        cc = tidx % t.chunks
        for i in cutlass.range_constexpr(t.kv_loads):
            r = _FP_copy_row(tidx, i, t.row_step, t.chunks)
            cute.copy(
                atom,
                gSrc[(0, 0, None), (sRows[n % 2, r], kvh, cc)],
                sDst[(None,), (_FP_swizzled_chunk(r, cc, t.chunks),)],
            )

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
    ):
        t = self.t
        hq, d, page, bm, chunks = t.hq, t.d, t.page, t.bm, t.chunks
        s_tiles = _FP_BN // 8
        o_tiles = d // 8
        tidx, _, _ = cute.arch.thread_idx()
        bid, _, _ = cute.arch.block_idx()
        h = bid % hq
        kvh = h // t.group
        wq = tidx // 32 * 16  # first query row of this warp
        lane = tidx % 32
        cc = tidx % chunks
        a_row, a_k = _FP_ldsm_rows_then_k(lane)
        b_row, b_k = _FP_ldsm_n_pairs(lane)
        smem = SmemAllocator()
        sQ = smem.allocate_tensor(cutlass.BFloat16, cute.make_layout((bm * d,)), byte_alignment=128)
        sK = smem.allocate_tensor(cutlass.BFloat16, cute.make_layout((_FP_BN * d,)), byte_alignment=128)
        sV = smem.allocate_tensor(cutlass.BFloat16, cute.make_layout((_FP_BN * d,)), byte_alignment=128)
        sRows = smem.allocate_tensor(
            cutlass.Int32, cute.make_layout((2, _FP_BN), stride=(_FP_BN, 1)), byte_alignment=16
        )
        # 16-byte chunk views: ((8,), (chunks,)) of shared tiles, ((1, 1, 8), (rows, heads, chunks)) of globals
        sQc = cute.zipped_divide(sQ, (8,))
        sKc = cute.zipped_divide(sK, (8,))
        sVc = cute.zipped_divide(sV, (8,))
        gQ = cute.zipped_divide(mQ, (1, 1, 8))
        gK = cute.zipped_divide(mK, (1, 1, 8))
        gV = cute.zipped_divide(mV, (1, 1, 8))
        gO = cute.zipped_divide(mO, (1, 1, 8))
        g2s = cute.make_copy_atom(
            cpasync.CopyG2SOp(cache_mode=cpasync.LoadCacheMode.GLOBAL), cutlass.BFloat16, num_bits_per_copy=128
        )
        ldsm = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(transpose=False, num_matrices=4), cutlass.BFloat16)
        ldsm_t = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(transpose=True, num_matrices=4), cutlass.BFloat16)
        mma = cute.make_tiled_mma(warp.MmaF16BF16Op(cutlass.BFloat16, cutlass.Float32, (16, 8, 16)))
        rA = mma.make_fragment_A(mma.partition_shape_A((16, 16)))
        rB = [mma.make_fragment_B(mma.partition_shape_B((8, 16))) for _ in range(2)]
        rA32 = cute.recast_tensor(rA, cutlass.Uint32)
        rB32 = [cute.recast_tensor(x, cutlass.Uint32) for x in rB]
        acc_s = [mma.make_fragment_C(mma.partition_shape_C((16, 8))) for _ in range(s_tiles)]
        acc_o = [mma.make_fragment_C(mma.partition_shape_C((16, 8))) for _ in range(o_tiles)]
        frag = cute.make_rmem_tensor((8,), cutlass.BFloat16)  # ldmatrix.x4 lands here, then moves to rA / rB
        frag32 = cute.recast_tensor(frag, cutlass.Uint32)
        m_run = cute.make_rmem_tensor((2,), cutlass.Float32)
        l_run = cute.make_rmem_tensor((2,), cutlass.Float32)
        out8 = cute.make_rmem_tensor((8,), cutlass.BFloat16)

        # this CTA's (sequence, query tile): tiles of a sequence are numbered from its last one
        batch = cute.size(mQO, mode=[0]) - 1
        seq = cutlass.Int32(-1)
        mblk = cutlass.Int32(0)
        rem = cutlass.Int32(bid // hq)
        for b in cutlass.range(batch):
            ntb = (mQO[b + 1] - mQO[b] + bm - 1) // bm
            if seq < 0:
                if rem < ntb:
                    seq = cutlass.Int32(b)
                    mblk = ntb - 1 - rem
                else:
                    rem = rem - ntb
        if seq >= 0:
            q0 = mQO[seq]
            lq = mQO[seq + 1] - q0
            kv0 = mKVP[seq]
            lk = mKVP[seq + 1] - kv0
            if cutlass.const_expr(page > 1):
                lk = (mKVP[seq + 1] - kv0 - 1) * page + mLast[seq]
            m0 = mblk * bm
            nrows = cutlass.min(lq - m0, bm)
            delta = lk - lq  # query i sees KV tokens j <= i + delta
            ntile = (m0 + nrows + delta + _FP_BN - 1) // _FP_BN
            for i in cutlass.range_constexpr(t.q_loads):
                r = _FP_copy_row(tidx, i, t.row_step, chunks)
                cute.copy(
                    g2s,
                    gQ[(0, 0, None), (q0 + cutlass.min(m0 + r, lq - 1), h, cc)],
                    sQc[(None,), (_FP_swizzled_chunk(r, cc, chunks),)],
                )
            self.fill_rows(sRows, mTable, kv0, lk, ntile - 1)
            cute.arch.sync_threads()
            self.copy_tile(g2s, sKc, gK, sRows, kvh, ntile - 1)
            cute.arch.cp_async_commit_group()
            m_run.fill(_FP_NEG_BIG)
            l_run.fill(0.0)
            for j in cutlass.range_constexpr(o_tiles):
                acc_o[j].fill(0.0)
            for it in cutlass.range(ntile):
                n = ntile - 1 - it
                # K(n) landed, and every warp is done reading V(n+1) and sRows[(n+1) % 2]
                cute.arch.cp_async_wait_group(0)
                cute.arch.sync_threads()
                self.copy_tile(g2s, sVc, gV, sRows, kvh, n)
                cute.arch.cp_async_commit_group()
                if n > 0:
                    self.fill_rows(sRows, mTable, kv0, lk, n - 1)
                # S = Q K(n)^T
                for j in cutlass.range_constexpr(s_tiles):
                    acc_s[j].fill(0.0)
                for kk in cutlass.range_constexpr(d // 16):
                    row = wq + a_row
                    cute.copy(ldsm, sQc[(None,), (_FP_swizzled_chunk(row, 2 * kk + a_k, chunks),)], frag)
                    for q in cutlass.range_constexpr(4):
                        rA32[q] = frag32[q]
                    for np in cutlass.range_constexpr(s_tiles // 2):
                        cute.copy(
                            ldsm, sKc[(None,), (_FP_swizzled_chunk(np * 16 + b_row, 2 * kk + b_k, chunks),)], frag
                        )
                        for half in cutlass.range_constexpr(2):
                            rB32[half][0] = frag32[2 * half]
                            rB32[half][1] = frag32[2 * half + 1]
                        for half in cutlass.range_constexpr(2):
                            acc = acc_s[2 * np + half]
                            cute.gemm(mma, acc, rA, rB[half], acc)
                # V(n) landed, sRows[(n-1) % 2] is written, and every warp is done reading K(n)
                cute.arch.cp_async_wait_group(0)
                cute.arch.sync_threads()
                if n > 0:
                    self.copy_tile(g2s, sKc, gK, sRows, kvh, n - 1)
                    cute.arch.cp_async_commit_group()
                for j in cutlass.range_constexpr(s_tiles):
                    for c in cutlass.range_constexpr(4):
                        acc_s[j][c] = acc_s[j][c] * scale2
                if (n + 1) * _FP_BN > m0 + delta + 1:  # the tile crosses the causal diagonal of row m0
                    for j in cutlass.range_constexpr(s_tiles):
                        for c in cutlass.range_constexpr(4):
                            qi = m0 + wq + _FP_acc_row(lane, c)
                            if n * _FP_BN + j * 8 + _FP_acc_col(lane, c) > qi + delta:
                                acc_s[j][c] = cutlass.Float32(_FP_NEG_BIG)
                for hf in cutlass.range_constexpr(2):
                    mx = m_run[hf]
                    for j in cutlass.range_constexpr(s_tiles):
                        for e in cutlass.range_constexpr(2):
                            mx = cute.arch.fmax(mx, acc_s[j][2 * hf + e])
                    mx = _FC__quad_max(mx)
                    # a row with every logit masked so far keeps p = 0 (2^(-3e38 - 0))
                    m_use = cutlass.select_(mx == cutlass.Float32(_FP_NEG_BIG), cutlass.Float32(0.0), mx)
                    alpha = cute.math.exp2(m_run[hf] - m_use, fastmath=True)
                    rs = cutlass.Float32(0.0)
                    for j in cutlass.range_constexpr(s_tiles):
                        for e in cutlass.range_constexpr(2):
                            p = cute.math.exp2(acc_s[j][2 * hf + e] - m_use, fastmath=True)
                            acc_s[j][2 * hf + e] = p
                            rs = rs + p
                    l_run[hf] = l_run[hf] * alpha + rs
                    m_run[hf] = mx
                    for j in cutlass.range_constexpr(o_tiles):
                        for e in cutlass.range_constexpr(2):
                            acc_o[j][2 * hf + e] = acc_o[j][2 * hf + e] * alpha
                # O += P V(n): the S accumulators of n8 tiles 2kk, 2kk + 1 are P's A fragment
                for kk in cutlass.range_constexpr(_FP_BN // 16):
                    for e in cutlass.range_constexpr(8):
                        frag[e] = acc_s[2 * kk + e // 4][e % 4].to(cutlass.BFloat16)
                    for q in cutlass.range_constexpr(4):
                        rA32[q] = frag32[q]
                    for dp in cutlass.range_constexpr(o_tiles // 2):
                        cute.copy(
                            ldsm_t, sVc[(None,), (_FP_swizzled_chunk(kk * 16 + a_row, 2 * dp + a_k, chunks),)], frag
                        )
                        for half in cutlass.range_constexpr(2):
                            rB32[half][0] = frag32[2 * half]
                            rB32[half][1] = frag32[2 * half + 1]
                        for half in cutlass.range_constexpr(2):
                            acc = acc_o[2 * dp + half]
                            cute.gemm(mma, acc, rA, rB[half], acc)
            # epilogue: every warp writes only its own rows of sQ, which only it has read
            for hf in cutlass.range_constexpr(2):
                row = wq + _FP_acc_row(lane, 2 * hf)
                total = _FC__quad_sum(l_run[hf])
                inv = cutlass.Float32(1.0) / total
                for j in cutlass.range_constexpr(o_tiles):
                    for e in cutlass.range_constexpr(2):
                        sQ[_FP_swizzled_chunk(row, j, chunks) * 8 + _FP_acc_col(lane, e)] = (
                            acc_o[j][2 * hf + e] * inv
                        ).to(cutlass.BFloat16)
                if lane % 4 == 0:  # noqa: SIM102 (dynamic conditions, one per if)
                    if row < nrows:
                        mLse[q0 + m0 + row, h] = m_run[hf] + cute.math.log2(total)
            cute.arch.sync_threads()
            for i in cutlass.range_constexpr(t.q_loads):
                r = _FP_copy_row(tidx, i, t.row_step, chunks)
                if r < nrows:
                    cute.autovec_copy(sQc[(None,), (_FP_swizzled_chunk(r, cc, chunks),)], out8)
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
        total_q = cute.size(mQ, mode=[0])
        batch = cute.size(mQO, mode=[0]) - 1
        tiles = (total_q + self.t.bm - 1) // self.t.bm + batch
        self.kernel(mQ, mK, mV, mQO, mKVP, mTable, mLast, mO, mLse, scale2).launch(
            grid=[tiles * self.t.hq, 1, 1], block=[_FP_THREADS, 1, 1]
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
            float(sm_scale) * _FC_LOG2E,
        )
        return out, lse


FC = SimpleNamespace(
    LOG2E=_FC_LOG2E,
    _quad_max=_FC__quad_max,
    _quad_sum=_FC__quad_sum,
    FlashPrefill=_FC_FlashPrefill,
)

# ---- end of bundle ----


_PREFILL = FC.FlashPrefill(FP.Tiling(hq=24, hkv=8, d=128, page=64))


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
