"""p14 mla_paged_decode_h16_ckv512_kpe64_ps1_bf16 — plan `splitkv`, CuTe DSL: MLA decode on mma.sync + a merge kernel.

Plan (the same kernels as `14_splitkv_tirx.py`, index math from `flash_prefill.py`): the 16 heads of a
sequence are one m16 row tile, so the absorbed MLA decode runs on the warp MMA atom 16x8x16 bf16 ->
fp32. Kernel 1 splits the concatenated token stream of all sequences (CSR order of kv_indices) into
2 x SMs equal ranges, one CTA of 4 warps each, and walks the sequences its range meets. Per (CTA,
sequence) segment: the 16 x 576 query (q_nope | q_pe) goes to shared memory and each warp keeps the
ldmatrix A fragments of its 144 dims in registers; tiles of 32 tokens (ckv | kpe rows through the page
table, staged per tile in shared memory) are double-buffered with 16-byte cp.async (CopyG2SOp) into
XOR-swizzled shared memory. Each warp computes Q·Kᵀ over its 144 dims; the 4 partial 16 x 32 score
tiles are summed through shared memory, every warp runs the same base-2 online softmax (fp32, tokens
past the segment masked with -3e38) and multiplies P (bf16, registers) by its 128 latent dims of V = ckv
(ldmatrix.trans). The segment's normalised fp32 O and base-2 lse go to workspace slot CTA + sequence.
Kernel 2, one CTA per sequence, merges its segments: M = max lse_k, w_k = 2^(lse_k - M),
out = sum w_k O_k / sum w_k (bf16), lse = M + log2(sum w_k). Memory-bound: every cache row is read once.
Symbolic sizes: one compilation of each kernel, cached, called with torch tensors through TVM FFI.
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

# ---- end of bundle ----


H = 16  # query heads: one m16 tile
DC = 512  # latent (ckv) dims: the value, and the first part of the key
DP = 64  # rope (kpe) dims
DK = DC + DP
CHUNKS = DK // 8  # 16-byte chunks of a query or cache row
CKV_CHUNKS = DC // 8
BT = 32  # tokens per KV tile
K_STEPS = DK // 16 // FP.WARPS  # Q·Kᵀ k-steps of a warp (144 dims)
V_TILES = DC // FP.WARPS // 8  # n8 output tiles of a warp (128 dims)
S_TILES = BT // 8
Q_COPIES = H * CHUNKS // FP.THREADS
KV_COPIES = BT * CHUNKS // FP.THREADS
CTAS_PER_SM = 2  # 98 KiB of shared memory a CTA
MERGE_THREADS = 256
MERGE_VEC = H * DC // MERGE_THREADS  # dims a merge thread owns
LOG2E = 1.0 / math.log(2.0)


@cute.jit
def _quad_max(x: cutlass.Float32) -> cutlass.Float32:
    x = cute.arch.fmax(x, cute.arch.shuffle_sync_bfly(x, offset=2))
    return cute.arch.fmax(x, cute.arch.shuffle_sync_bfly(x, offset=1))


@cute.jit
def _quad_sum(x: cutlass.Float32) -> cutlass.Float32:
    x = x + cute.arch.shuffle_sync_bfly(x, offset=2)
    return x + cute.arch.shuffle_sync_bfly(x, offset=1)


@cute.jit
def _fill_rows(sRows: cute.Tensor, mIdx: cute.Tensor, t, s0, s1):
    # tokens past the segment re-read its last token (finite, masked)
    tidx, _, _ = cute.arch.thread_idx()
    if tidx < BT:
        sRows[t % 2, tidx] = mIdx[cutlass.min(s0 + t * BT + tidx, s1 - 1)]


@cute.jit
def _copy_tile(atom: cute.CopyAtom, sKVc: cute.Tensor, gC: cute.Tensor, gP: cute.Tensor, sRows: cute.Tensor, t):
    tidx, _, _ = cute.arch.thread_idx()
    for i in cutlass.range_constexpr(KV_COPIES):
        r, ch = FP.flat_copy(tidx, i, CHUNKS)
        dst = sKVc[(None,), (t % 2 * BT * CHUNKS + FP.swizzled_chunk(r, ch, CHUNKS),)]
        if ch < CKV_CHUNKS:
            cute.copy(atom, gC[(0, None), (sRows[t % 2, r], ch)], dst)
        else:
            cute.copy(atom, gP[(0, None), (sRows[t % 2, r], ch - CKV_CHUNKS)], dst)


@cute.kernel
def _partial_kernel(
    mQN: cute.Tensor,
    mQP: cute.Tensor,
    mCKV: cute.Tensor,
    mKPE: cute.Tensor,
    mIP: cute.Tensor,
    mIdx: cute.Tensor,
    mPO: cute.Tensor,
    mPL: cute.Tensor,
    scale2: cutlass.Float32,
):
    tidx, _, _ = cute.arch.thread_idx()
    c, _, _ = cute.arch.block_idx()
    grid, _, _ = cute.arch.grid_dim()
    wid = tidx // 32
    lane = tidx % 32
    a_row, a_k = FP.ldsm_rows_then_k(lane)
    b_row, b_k = FP.ldsm_n_pairs(lane)
    smem = SmemAllocator()
    sQ = smem.allocate_tensor(cutlass.BFloat16, cute.make_layout((H * DK,)), byte_alignment=128)
    sKV = smem.allocate_tensor(cutlass.BFloat16, cute.make_layout((2 * BT * DK,)), byte_alignment=128)  # 2 tiles
    sS = smem.allocate_tensor(cutlass.Float32, cute.make_layout((FP.WARPS * S_TILES * 4 * 32,)), byte_alignment=16)
    sRows = smem.allocate_tensor(cutlass.Int32, cute.make_layout((2, BT), stride=(BT, 1)), byte_alignment=16)
    # 16-byte chunk views: ((8,), (chunk,)) of shared tiles, ((1, 8), (row, chunk)) of globals
    sQc = cute.zipped_divide(sQ, (8,))
    sKVc = cute.zipped_divide(sKV, (8,))
    gQN = cute.zipped_divide(mQN, (1, 1, 8))
    gQP = cute.zipped_divide(mQP, (1, 1, 8))
    gC = cute.zipped_divide(mCKV, (1, 8))
    gP = cute.zipped_divide(mKPE, (1, 8))
    g2s = cute.make_copy_atom(
        cpasync.CopyG2SOp(cache_mode=cpasync.LoadCacheMode.GLOBAL), cutlass.BFloat16, num_bits_per_copy=128
    )
    ldsm = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(transpose=False, num_matrices=4), cutlass.BFloat16)
    ldsm_t = cute.make_copy_atom(warp.LdMatrix8x8x16bOp(transpose=True, num_matrices=4), cutlass.BFloat16)
    mma = cute.make_tiled_mma(warp.MmaF16BF16Op(cutlass.BFloat16, cutlass.Float32, (16, 8, 16)))
    rQ = [mma.make_fragment_A(mma.partition_shape_A((16, 16))) for _ in range(K_STEPS)]
    rP = [mma.make_fragment_A(mma.partition_shape_A((16, 16))) for _ in range(BT // 16)]
    rB = [mma.make_fragment_B(mma.partition_shape_B((8, 16))) for _ in range(2)]
    rQ32 = [cute.recast_tensor(x, cutlass.Uint32) for x in rQ]
    rP32 = [cute.recast_tensor(x, cutlass.Uint32) for x in rP]
    rB32 = [cute.recast_tensor(x, cutlass.Uint32) for x in rB]
    acc_s = [mma.make_fragment_C(mma.partition_shape_C((16, 8))) for _ in range(S_TILES)]
    acc_o = [mma.make_fragment_C(mma.partition_shape_C((16, 8))) for _ in range(V_TILES)]
    frag = cute.make_rmem_tensor((8,), cutlass.BFloat16)  # ldmatrix.x4 lands here, then moves to rQ / rB
    frag32 = cute.recast_tensor(frag, cutlass.Uint32)
    m_run = cute.make_rmem_tensor((2,), cutlass.Float32)
    l_run = cute.make_rmem_tensor((2,), cutlass.Float32)

    # this CTA's range [lo, hi) of the concatenated token stream and the sequences it meets
    batch = cute.size(mIP, mode=[0]) - 1
    total = mIP[batch]
    span = (total + grid - 1) // grid
    lo = c * span
    hi = cutlass.min(lo + span, total)
    b_first = cutlass.Int32(0)
    b_end = cutlass.Int32(0)
    for j in cutlass.range(batch):
        if mIP[j + 1] <= lo:
            b_first = b_first + 1
        if mIP[j] < hi:
            b_end = b_end + 1
    for bb in cutlass.range(b_first, b_end):
        s0 = cutlass.max(mIP[bb], lo)
        s1 = cutlass.min(mIP[bb + 1], hi)
        n = s1 - s0
        ntiles = (n + BT - 1) // BT
        for i in cutlass.range_constexpr(Q_COPIES):
            r, ch = FP.flat_copy(tidx, i, CHUNKS)
            dst = sQc[(None,), (FP.swizzled_chunk(r, ch, CHUNKS),)]
            if ch < CKV_CHUNKS:
                cute.copy(g2s, gQN[(0, 0, None), (bb, r, ch)], dst)
            else:
                cute.copy(g2s, gQP[(0, 0, None), (bb, r, ch - CKV_CHUNKS)], dst)
        cute.arch.cp_async_commit_group()
        _fill_rows(sRows, mIdx, 0, s0, s1)
        cute.arch.sync_threads()
        _copy_tile(g2s, sKVc, gC, gP, sRows, 0)
        cute.arch.cp_async_commit_group()
        cute.arch.cp_async_wait_group(1)  # the query landed; tile 0 may still be in flight
        cute.arch.sync_threads()
        for ks in cutlass.range_constexpr(K_STEPS):
            cute.copy(ldsm, sQc[(None,), (FP.swizzled_chunk(a_row, 2 * (wid * K_STEPS + ks) + a_k, CHUNKS),)], frag)
            for q in cutlass.range_constexpr(4):
                rQ32[ks][q] = frag32[q]
        m_run.fill(FP.NEG_BIG)
        l_run.fill(0.0)
        for j in cutlass.range_constexpr(V_TILES):
            acc_o[j].fill(0.0)
        for it in cutlass.range(ntiles):
            if it + 1 < ntiles:
                _fill_rows(sRows, mIdx, it + 1, s0, s1)
            # sRows[(it+1) % 2] is written, and every warp is done with tile it-1 and the partial scores
            cute.arch.sync_threads()
            if it + 1 < ntiles:
                _copy_tile(g2s, sKVc, gC, gP, sRows, it + 1)
                cute.arch.cp_async_commit_group()
                cute.arch.cp_async_wait_group(1)
            else:
                cute.arch.cp_async_wait_group(0)
            cute.arch.sync_threads()
            # this warp's share of S = Q K^T: dims 144 wid .. 144 wid + 143
            for j in cutlass.range_constexpr(S_TILES):
                acc_s[j].fill(0.0)
            for ks in cutlass.range_constexpr(K_STEPS):
                for np in cutlass.range_constexpr(S_TILES // 2):
                    k_chunk = FP.swizzled_chunk(np * 16 + b_row, 2 * (wid * K_STEPS + ks) + b_k, CHUNKS)
                    cute.copy(ldsm, sKVc[(None,), (it % 2 * BT * CHUNKS + k_chunk,)], frag)
                    for half in cutlass.range_constexpr(2):
                        rB32[half][0] = frag32[2 * half]
                        rB32[half][1] = frag32[2 * half + 1]
                    for half in cutlass.range_constexpr(2):
                        acc = acc_s[2 * np + half]
                        cute.gemm(mma, acc, rQ[ks], rB[half], acc)
            for j in cutlass.range_constexpr(S_TILES):
                for e in cutlass.range_constexpr(4):
                    sS[((wid * S_TILES + j) * 4 + e) * 32 + lane] = acc_s[j][e]
            cute.arch.sync_threads()
            # every warp sums the four shares and runs the same softmax
            for j in cutlass.range_constexpr(S_TILES):
                for e in cutlass.range_constexpr(4):
                    tot = cutlass.Float32(0.0)
                    for w in cutlass.range_constexpr(FP.WARPS):
                        tot = tot + sS[((w * S_TILES + j) * 4 + e) * 32 + lane]
                    acc_s[j][e] = tot * scale2
            if (it + 1) * BT > n:  # the segment ends inside this tile
                for j in cutlass.range_constexpr(S_TILES):
                    for e in cutlass.range_constexpr(4):
                        if it * BT + j * 8 + FP.acc_col(lane, e) >= n:
                            acc_s[j][e] = cutlass.Float32(FP.NEG_BIG)
            for hf in cutlass.range_constexpr(2):
                mx = m_run[hf]
                for j in cutlass.range_constexpr(S_TILES):
                    for e in cutlass.range_constexpr(2):
                        mx = cute.arch.fmax(mx, acc_s[j][2 * hf + e])
                mx = _quad_max(mx)
                alpha = cute.math.exp2(m_run[hf] - mx, fastmath=True)
                rs = cutlass.Float32(0.0)
                for j in cutlass.range_constexpr(S_TILES):
                    for e in cutlass.range_constexpr(2):
                        p = cute.math.exp2(acc_s[j][2 * hf + e] - mx, fastmath=True)
                        acc_s[j][2 * hf + e] = p
                        rs = rs + p
                l_run[hf] = l_run[hf] * alpha + rs
                m_run[hf] = mx
                for j in cutlass.range_constexpr(V_TILES):
                    for e in cutlass.range_constexpr(2):
                        acc_o[j][2 * hf + e] = acc_o[j][2 * hf + e] * alpha
            # O += P V: the S accumulators of n8 tiles 2kk, 2kk + 1 are P's A fragment
            for kk in cutlass.range_constexpr(BT // 16):
                for e in cutlass.range_constexpr(8):
                    frag[e] = acc_s[2 * kk + e // 4][e % 4].to(cutlass.BFloat16)
                for q in cutlass.range_constexpr(4):
                    rP32[kk][q] = frag32[q]
            for kk in cutlass.range_constexpr(BT // 16):
                for dp in cutlass.range_constexpr(V_TILES // 2):
                    v_chunk = FP.swizzled_chunk(kk * 16 + a_row, wid * V_TILES + 2 * dp + a_k, CHUNKS)
                    cute.copy(ldsm_t, sKVc[(None,), (it % 2 * BT * CHUNKS + v_chunk,)], frag)
                    for half in cutlass.range_constexpr(2):
                        rB32[half][0] = frag32[2 * half]
                        rB32[half][1] = frag32[2 * half + 1]
                    for half in cutlass.range_constexpr(2):
                        acc = acc_o[2 * dp + half]
                        cute.gemm(mma, acc, rP[kk], rB[half], acc)
        # the segment's normalised O and lse, in slot CTA + sequence
        for hf in cutlass.range_constexpr(2):
            head = FP.acc_row(lane, 2 * hf)
            lsum = _quad_sum(l_run[hf])
            inv = cutlass.Float32(1.0) / lsum
            for j in cutlass.range_constexpr(V_TILES):
                for e in cutlass.range_constexpr(2):
                    mPO[c + bb, head, wid * V_TILES * 8 + j * 8 + FP.acc_col(lane, e)] = acc_o[j][2 * hf + e] * inv
            if wid == 0:  # noqa: SIM102 (dynamic conditions, one per if)
                if lane % 4 == 0:
                    mPL[c + bb, head] = m_run[hf] + cute.math.log2(lsum)
        cute.arch.sync_threads()  # every warp is done with sQ and sKV before the next segment's copies


@cute.kernel
def _merge_kernel(
    mPO: cute.Tensor, mPL: cute.Tensor, mIP: cute.Tensor, mO: cute.Tensor, mLse: cute.Tensor, grid: cutlass.Int32
):
    tidx, _, _ = cute.arch.thread_idx()
    b, _, _ = cute.arch.block_idx()
    h = tidx // (MERGE_THREADS // H)
    part = tidx % (MERGE_THREADS // H)  # this thread's 32 dims: part * 32 ..
    batch = cute.size(mIP, mode=[0]) - 1
    span = (mIP[batch] + grid - 1) // grid
    c0 = mIP[b] // span
    pieces = (mIP[b + 1] - 1) // span - c0 + 1
    gPO = cute.zipped_divide(mPO, (1, 1, MERGE_VEC))
    gO = cute.zipped_divide(mO, (1, 1, MERGE_VEC))
    big = cutlass.Float32(FP.NEG_BIG)
    for k in cutlass.range(pieces):
        big = cute.arch.fmax(big, mPL[c0 + k + b, h])
    wsum = cutlass.Float32(0.0)
    acc = cute.make_rmem_tensor((MERGE_VEC,), cutlass.Float32)
    acc.fill(0.0)
    rPart = cute.make_rmem_tensor((MERGE_VEC,), cutlass.Float32)
    for k in cutlass.range(pieces):
        w = cute.math.exp2(mPL[c0 + k + b, h] - big, fastmath=True)
        wsum = wsum + w
        cute.autovec_copy(gPO[(0, 0, None), (c0 + k + b, h, part)], rPart)
        acc.store(acc.load() + rPart.load() * w)
    inv = cutlass.Float32(1.0) / wsum
    rOut = cute.make_rmem_tensor((MERGE_VEC,), cutlass.BFloat16)
    rOut.store((acc.load() * inv).to(cutlass.BFloat16))
    cute.autovec_copy(rOut, gO[(0, 0, None), (b, h, part)])
    if part == 0:
        mLse[b, h] = big + cute.math.log2(wsum)


@cute.jit
def _partial(
    mQN: cute.Tensor,
    mQP: cute.Tensor,
    mCKV: cute.Tensor,
    mKPE: cute.Tensor,
    mIP: cute.Tensor,
    mIdx: cute.Tensor,
    mPO: cute.Tensor,
    mPL: cute.Tensor,
    scale2: cutlass.Float32,
    grid: cutlass.Int32,
):
    _partial_kernel(mQN, mQP, mCKV, mKPE, mIP, mIdx, mPO, mPL, scale2).launch(
        grid=[grid, 1, 1], block=[FP.THREADS, 1, 1]
    )


@cute.jit
def _merge(
    mPO: cute.Tensor, mPL: cute.Tensor, mIP: cute.Tensor, mO: cute.Tensor, mLse: cute.Tensor, grid: cutlass.Int32
):
    batch = cute.size(mO, mode=[0])
    _merge_kernel(mPO, mPL, mIP, mO, mLse, grid).launch(grid=[batch, 1, 1], block=[MERGE_THREADS, 1, 1])


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        batch, batch1, pages, nidx, slots = (cute.sym_int() for _ in range(5))
        bf16 = cutlass.BFloat16
        qn = make_fake_compact_tensor(bf16, (batch, H, DC), stride_order=(2, 1, 0), assumed_align=16)
        qp = make_fake_compact_tensor(bf16, (batch, H, DP), stride_order=(2, 1, 0), assumed_align=16)
        ckv = make_fake_compact_tensor(bf16, (pages, DC), stride_order=(1, 0), assumed_align=16)
        kpe = make_fake_compact_tensor(bf16, (pages, DP), stride_order=(1, 0), assumed_align=16)
        ip = make_fake_compact_tensor(cutlass.Int32, (batch1,), assumed_align=4)
        idx = make_fake_compact_tensor(cutlass.Int32, (nidx,), assumed_align=4)
        po = make_fake_compact_tensor(cutlass.Float32, (slots, H, DC), stride_order=(2, 1, 0), assumed_align=16)
        pl = make_fake_compact_tensor(cutlass.Float32, (slots, H), stride_order=(1, 0), assumed_align=4)
        lse = make_fake_compact_tensor(cutlass.Float32, (batch, H), stride_order=(1, 0), assumed_align=4)
        opts = "--enable-tvm-ffi"
        one, grid = cutlass.Float32(1.0), cutlass.Int32(1)
        _COMPILED.append(cute.compile(_partial, qn, qp, ckv, kpe, ip, idx, po, pl, one, grid, options=opts))
        _COMPILED.append(cute.compile(_merge, po, pl, ip, qn, lse, grid, options=opts))
    return _COMPILED[0], _COMPILED[1]


def run(
    q_nope: torch.Tensor,
    q_pe: torch.Tensor,
    ckv_cache: torch.Tensor,
    kpe_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    partial, merge = _compiled()
    batch, pages = q_nope.shape[0], ckv_cache.shape[0]
    dev = q_nope.device
    grid = CTAS_PER_SM * torch.cuda.get_device_properties(dev).multi_processor_count
    part_o = torch.empty((grid + batch, H, DC), dtype=torch.float32, device=dev)
    part_lse = torch.empty((grid + batch, H), dtype=torch.float32, device=dev)
    # page size 1: the pools are [pages, dims]; the scale carries log2(e) so the kernel works in base 2
    partial(
        q_nope.contiguous(),
        q_pe.contiguous(),
        ckv_cache.reshape(pages, DC),
        kpe_cache.reshape(pages, DP),
        kv_indptr.contiguous(),
        kv_indices.contiguous(),
        part_o,
        part_lse,
        float(sm_scale) * LOG2E,
        grid,
    )
    out = torch.empty_like(q_nope)
    lse = torch.empty((batch, H), dtype=torch.float32, device=dev)
    merge(part_o, part_lse, kv_indptr.contiguous(), out, lse, grid)
    return out, lse
