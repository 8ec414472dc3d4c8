"""p14 mla_paged_decode_h16_ckv512_kpe64_ps1_bf16 — plan `splitkv`, CuTe DSL: MLA decode on mma.sync + a merge kernel.

Plan (the same kernels as `14_splitkv_tirx.py`, index math from `_flash_prefill.py`): the 16 heads of a
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
import sys
from pathlib import Path

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.nvgpu import cpasync, warp
from cutlass.cute.runtime import make_fake_compact_tensor
from cutlass.memory.smem import SmemAllocator

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared index math beside this file
from _flash_prefill import (
    NEG_BIG,
    THREADS,
    acc_col,
    acc_row,
    flat_copy,
    ldsm_n_pairs,
    ldsm_rows_then_k,
    swizzled_chunk,
)

H = 16  # query heads: one m16 tile
DC = 512  # latent (ckv) dims: the value, and the first part of the key
DP = 64  # rope (kpe) dims
DK = DC + DP
CHUNKS = DK // 8  # 16-byte chunks of a query or cache row
CKV_CHUNKS = DC // 8
BT = 32  # tokens per KV tile
WARPS = THREADS // 32
K_STEPS = DK // 16 // WARPS  # Q·Kᵀ k-steps of a warp (144 dims)
V_TILES = DC // WARPS // 8  # n8 output tiles of a warp (128 dims)
S_TILES = BT // 8
Q_COPIES = H * CHUNKS // THREADS
KV_COPIES = BT * CHUNKS // THREADS
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
        r, ch = flat_copy(tidx, i, CHUNKS)
        dst = sKVc[(None,), (t % 2 * BT * CHUNKS + swizzled_chunk(r, ch, CHUNKS),)]
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
    a_row, a_k = ldsm_rows_then_k(lane)
    b_row, b_k = ldsm_n_pairs(lane)
    smem = SmemAllocator()
    sQ = smem.allocate_tensor(cutlass.BFloat16, cute.make_layout((H * DK,)), byte_alignment=128)
    sKV = smem.allocate_tensor(cutlass.BFloat16, cute.make_layout((2 * BT * DK,)), byte_alignment=128)  # 2 tiles
    sS = smem.allocate_tensor(cutlass.Float32, cute.make_layout((WARPS * S_TILES * 4 * 32,)), byte_alignment=16)
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
            r, ch = flat_copy(tidx, i, CHUNKS)
            dst = sQc[(None,), (swizzled_chunk(r, ch, CHUNKS),)]
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
            cute.copy(ldsm, sQc[(None,), (swizzled_chunk(a_row, 2 * (wid * K_STEPS + ks) + a_k, CHUNKS),)], frag)
            for q in cutlass.range_constexpr(4):
                rQ32[ks][q] = frag32[q]
        m_run.fill(NEG_BIG)
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
                    k_chunk = swizzled_chunk(np * 16 + b_row, 2 * (wid * K_STEPS + ks) + b_k, CHUNKS)
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
                    for w in cutlass.range_constexpr(WARPS):
                        tot = tot + sS[((w * S_TILES + j) * 4 + e) * 32 + lane]
                    acc_s[j][e] = tot * scale2
            if (it + 1) * BT > n:  # the segment ends inside this tile
                for j in cutlass.range_constexpr(S_TILES):
                    for e in cutlass.range_constexpr(4):
                        if it * BT + j * 8 + acc_col(lane, e) >= n:
                            acc_s[j][e] = cutlass.Float32(NEG_BIG)
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
                    v_chunk = swizzled_chunk(kk * 16 + a_row, wid * V_TILES + 2 * dp + a_k, CHUNKS)
                    cute.copy(ldsm_t, sKVc[(None,), (it % 2 * BT * CHUNKS + v_chunk,)], frag)
                    for half in cutlass.range_constexpr(2):
                        rB32[half][0] = frag32[2 * half]
                        rB32[half][1] = frag32[2 * half + 1]
                    for half in cutlass.range_constexpr(2):
                        acc = acc_o[2 * dp + half]
                        cute.gemm(mma, acc, rP[kk], rB[half], acc)
        # the segment's normalised O and lse, in slot CTA + sequence
        for hf in cutlass.range_constexpr(2):
            head = acc_row(lane, 2 * hf)
            lsum = _quad_sum(l_run[hf])
            inv = cutlass.Float32(1.0) / lsum
            for j in cutlass.range_constexpr(V_TILES):
                for e in cutlass.range_constexpr(2):
                    mPO[c + bb, head, wid * V_TILES * 8 + j * 8 + acc_col(lane, e)] = acc_o[j][2 * hf + e] * inv
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
    big = cutlass.Float32(NEG_BIG)
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
    _partial_kernel(mQN, mQP, mCKV, mKPE, mIP, mIdx, mPO, mPL, scale2).launch(grid=[grid, 1, 1], block=[THREADS, 1, 1])


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
