"""p03 gqa_paged_decode_h32_kv8_d128_ps64_bf16 — plan `splitkvprefetch`, CuTe DSL: split-KV over pages + a merge.

Plan `pageprefetch` (one CTA per (sequence, KV head), the next page's kv_indices entry loaded a step
ahead) cut into SPLITS = 4 slices of every sequence's pages, as plan `splitkv` cuts p01's tokens: 64 × 8
× 4 = 2048 CTAs instead of 512, so the block scheduler balances sequences of unequal length over many
waves instead of leaving the tail of two waves (p01 on the H200: 0.2275 ms split against 0.2688 ms per
(sequence, head), TIRx). Kernel 1: slice sp of sequence b holds pages [p0, p1) with pps = ceil(pages_b /
4), p0 = min(sp·pps, pages_b), p1 = min(p0 + pps, pages_b), and its tokens are p0·64 .. min(p1·64,
len_b) − 1 (len_b = (pages_b − 1)·64 + kv_last_page_len[b]); an empty slice (p0 = pages_b, sequences of
fewer than 4 pages) runs no step. A step is one page (STEP = PS = 64): token t of the slice is pool row
kv_indices[kv_indptr[b] + p0 + t / 64]·64 + t % 64, and each lane loads the next page's entry while
this step's K and V loads are in flight. One CTA of 256 threads serves the 4 query heads of its KV head:
16 half-warps stream tokens four at a time (K and V 16-byte loads issued before any math), a lane owns 8
dims, q is pre-scaled by sm_scale·log2(e), q·k reduced over 16 lanes with butterfly shuffles, a base-2
online softmax per half-warp, and the 16 partial states merged through 32 KiB of shared memory into the
slice's normalised float32 output and base-2 lse (an empty slice writes zeros and lse = −3e38). Kernel 2:
one warp per (sequence, query head), CTAs of 8 warps, a lane owning 4 dims (one 16-byte load per slice):
M = max lse_s, w_s = 2^(lse_s − M), out = Σ w_s·O_s / Σ w_s (bf16), lse = M + log2(Σ w_s). The float32
partials are 4 MiB, small beside the 537 MB of K/V. Float32 throughout; only the output is rounded to
bf16. Symbolic sizes: one compilation of each kernel, cached, called with torch tensors through TVM FFI.
"""

import math

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor
from cutlass.memory.smem import SmemAllocator

HQ = 32
HKV = 8
GROUP = HQ // HKV  # query heads per KV head
D = 128
PS = 64  # tokens per page
VEC = 8  # bf16 per 16-byte load
LANES = D // VEC  # lanes per token row
THREADS = 256
ROWS = THREADS // LANES  # half-warps per CTA
UNROLL = 4  # tokens per half-warp per step
STEP = ROWS * UNROLL  # tokens per CTA per step
OUT_PER_THREAD = GROUP * D // THREADS
SPLITS = 4  # slices of every (sequence, KV head)'s pages
MERGE_VEC = D // 32  # dims per lane in the merge kernel
MERGE_WARPS = 8  # (sequence, query head) pairs per merge CTA
LOG2E = 1.0 / math.log(2.0)
assert STEP == PS  # a step's 64 tokens are one page: one kv_indices entry a step
NEG_BIG = -3.0e38  # finite "minus infinity": 2^(NEG_BIG - s) is 0 and never NaN


@cute.jit
def _half_warp_sum(x: cutlass.Float32) -> cutlass.Float32:
    # xor offsets 8..1 stay inside each 16-lane half of the warp
    for i in cutlass.range_constexpr(4):
        x = x + cute.arch.shuffle_sync_bfly(x, offset=(LANES // 2) >> i)
    return x


@cute.kernel
def _partial_kernel(
    mQ: cute.Tensor,
    mK: cute.Tensor,
    mV: cute.Tensor,
    mIndptr: cute.Tensor,
    mIdx: cute.Tensor,
    mLast: cute.Tensor,
    mPart: cute.Tensor,
    mPLse: cute.Tensor,
    scale2: cutlass.Float32,
):
    tidx, _, _ = cute.arch.thread_idx()
    bhs, _, _ = cute.arch.block_idx()
    b = bhs // (HKV * SPLITS)
    kvh = bhs // SPLITS % HKV
    sp = bhs % SPLITS
    row = tidx // LANES
    lane = tidx % LANES
    smem = SmemAllocator()
    sAcc = smem.allocate_tensor(
        cutlass.Float32, cute.make_layout((ROWS, GROUP, D), stride=(GROUP * D, D, 1)), byte_alignment=16
    )
    sM = smem.allocate_tensor(cutlass.Float32, cute.make_layout((ROWS, GROUP), stride=(GROUP, 1)), byte_alignment=16)
    sL = smem.allocate_tensor(cutlass.Float32, cute.make_layout((ROWS, GROUP), stride=(GROUP, 1)), byte_alignment=16)
    # ((1, 1, VEC), (rows, heads, LANES)) views: one 16-byte vector per lane
    gQ = cute.zipped_divide(mQ, (1, 1, VEC))
    gK = cute.zipped_divide(mK, (1, 1, VEC))
    gV = cute.zipped_divide(mV, (1, 1, VEC))
    qf = []
    for h in cutlass.range_constexpr(GROUP):
        rQ = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
        cute.autovec_copy(gQ[(0, 0, None), (b, kvh * GROUP + h, lane)], rQ)
        qf.append(rQ.load().to(cutlass.Float32) * scale2)
    rM = cute.make_rmem_tensor((GROUP,), cutlass.Float32)
    rL = cute.make_rmem_tensor((GROUP,), cutlass.Float32)
    rAcc = cute.make_rmem_tensor((GROUP, VEC), cutlass.Float32)
    rP = cute.make_rmem_tensor((UNROLL,), cutlass.Int32)
    rK = [cute.make_rmem_tensor((VEC,), cutlass.BFloat16) for _ in range(UNROLL)]
    rV = [cute.make_rmem_tensor((VEC,), cutlass.BFloat16) for _ in range(UNROLL)]
    rM.fill(NEG_BIG)
    rL.fill(0.0)
    rAcc.fill(0.0)
    # the slice's pages [p0, p1) and tokens p0·64 .. min(p1·64, seq_len) - 1 (none when p0 = the page count)
    n_pages = mIndptr[b + 1] - mIndptr[b]
    per_split = (n_pages + SPLITS - 1) // SPLITS
    p0 = cutlass.min(sp * per_split, n_pages)
    p1 = cutlass.min(p0 + per_split, n_pages)
    seq_len = (n_pages - 1) * PS + mLast[b]
    start = mIndptr[b] + p0
    length = cutlass.max(cutlass.min(p1 * PS, seq_len) - p0 * PS, 0)
    ahead = cutlass.Int32(0)  # the kv_indices entry of the next step's page
    if length > 0:
        ahead = mIdx[start]
    for it in cutlass.range((length + STEP - 1) // STEP):
        # pool rows (page·64 + slot) of step it = the slice's page it, whose entry was loaded a step ahead
        for u in cutlass.range_constexpr(UNROLL):
            t = it * STEP + u * ROWS + row
            rP[u] = cutlass.Int32(-1)
            if t < length:
                rP[u] = ahead * PS + u * ROWS + row
        for u in cutlass.range_constexpr(UNROLL):
            rK[u].fill(0.0)
            rV[u].fill(0.0)
            if rP[u] >= 0:
                cute.autovec_copy(gK[(0, 0, None), (rP[u], kvh, lane)], rK[u])
                cute.autovec_copy(gV[(0, 0, None), (rP[u], kvh, lane)], rV[u])
        # the next page's kv_indices entry, in flight with this step's K and V (used a step later)
        if (it + 1) * STEP < length:
            ahead = mIdx[start + it + 1]
        s = []
        valid = []
        for u in cutlass.range_constexpr(UNROLL):
            kf = rK[u].load().to(cutlass.Float32)
            ok = cutlass.Float32(1.0)
            pen = cutlass.Float32(0.0)
            if rP[u] < 0:
                ok = cutlass.Float32(0.0)
                pen = cutlass.Float32(NEG_BIG)
            valid.append(ok)
            su = []
            for h in cutlass.range_constexpr(GROUP):
                dot = (qf[h] * kf).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), reduction_profile=0)
                # every lane shuffles (rows past the end carry zeros), so full-mask shuffles are safe
                su.append(_half_warp_sum(dot) + pen)
            s.append(su)
        for h in cutlass.range_constexpr(GROUP):
            m_old = rM[h]
            m_new = m_old
            for u in cutlass.range_constexpr(UNROLL):
                m_new = cute.arch.fmax(m_new, s[u][h])
            alpha = cute.math.exp2(m_old - m_new, fastmath=True)
            # a masked token has s ≈ NEG_BIG; the 0/1 factor also covers m_new == NEG_BIG
            p = [cute.math.exp2(s[u][h] - m_new, fastmath=True) * valid[u] for u in range(UNROLL)]
            lsum = rL[h] * alpha
            for u in cutlass.range_constexpr(UNROLL):
                lsum = lsum + p[u]
            rL[h] = lsum
            for i in cutlass.range_constexpr(VEC):
                a = rAcc[h, i] * alpha
                for u in cutlass.range_constexpr(UNROLL):
                    # V stays bf16 in registers until its use (halves the live registers)
                    a = a + p[u] * cutlass.Float32(rV[u][i])
                rAcc[h, i] = a
            rM[h] = m_new
    for h in cutlass.range_constexpr(GROUP):
        for i in cutlass.range_constexpr(VEC):
            sAcc[row, h, lane * VEC + i] = rAcc[h, i]
        if lane == 0:
            sM[row, h] = rM[h]
            sL[row, h] = rL[h]
    cute.arch.sync_threads()
    # merge: thread tidx owns head oh, dims od .. od + OUT_PER_THREAD - 1
    oh = tidx // (D // OUT_PER_THREAD)
    od = (tidx % (D // OUT_PER_THREAD)) * OUT_PER_THREAD
    big = cutlass.Float32(NEG_BIG)
    for g in cutlass.range_constexpr(ROWS):
        big = cute.arch.fmax(big, sM[g, oh])
    total = cutlass.Float32(0.0)
    rOut = cute.make_rmem_tensor((OUT_PER_THREAD,), cutlass.Float32)
    rOut.fill(0.0)
    for g in cutlass.range_constexpr(ROWS):
        w = cute.math.exp2(sM[g, oh] - big, fastmath=True)
        total = total + sL[g, oh] * w
        for i in cutlass.range_constexpr(OUT_PER_THREAD):
            rOut[i] = rOut[i] + sAcc[g, oh, od + i] * w
    # an empty slice (a sequence of fewer than SPLITS pages) has total == 0: zeros, lse = NEG_BIG
    inv = cutlass.Float32(0.0)
    part_lse = cutlass.Float32(NEG_BIG)
    if total > cutlass.Float32(0.0):
        inv = cutlass.Float32(1.0) / total
        part_lse = big + cute.math.log2(total)
    for i in cutlass.range_constexpr(OUT_PER_THREAD):
        mPart[b, kvh * GROUP + oh, sp, od + i] = rOut[i] * inv
    if od == 0:
        mPLse[b, kvh * GROUP + oh, sp] = part_lse


@cute.kernel
def _merge_kernel(mPart: cute.Tensor, mPLse: cute.Tensor, mO: cute.Tensor, mLse: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bx, _, _ = cute.arch.block_idx()
    pair = bx * MERGE_WARPS + tidx // 32  # (sequence, query head)
    b = pair // HQ
    h = pair % HQ
    lane = tidx % 32
    # ((1, 1, 1, MERGE_VEC), (batch, heads, splits, 32)) view: one 16-byte float32 vector per lane
    gP = cute.zipped_divide(mPart, (1, 1, 1, MERGE_VEC))
    big = cutlass.Float32(NEG_BIG)
    for s in cutlass.range_constexpr(SPLITS):
        big = cute.arch.fmax(big, mPLse[b, h, s])
    wsum = cutlass.Float32(0.0)
    rAcc = cute.make_rmem_tensor((MERGE_VEC,), cutlass.Float32)
    rAcc.fill(0.0)
    rPv = [cute.make_rmem_tensor((MERGE_VEC,), cutlass.Float32) for _ in range(SPLITS)]
    for s in cutlass.range_constexpr(SPLITS):
        cute.autovec_copy(gP[(0, 0, 0, None), (b, h, s, lane)], rPv[s])
    for s in cutlass.range_constexpr(SPLITS):
        w = cute.math.exp2(mPLse[b, h, s] - big, fastmath=True)
        wsum = wsum + w
        for i in cutlass.range_constexpr(MERGE_VEC):
            rAcc[i] = rAcc[i] + w * rPv[s][i]
    inv = cutlass.Float32(1.0) / wsum
    for i in cutlass.range_constexpr(MERGE_VEC):
        mO[b, h, lane * MERGE_VEC + i] = (rAcc[i] * inv).to(cutlass.BFloat16)
    if lane == 0:
        mLse[b, h] = big + cute.math.log2(wsum)


@cute.jit
def _partial(
    mQ: cute.Tensor,
    mK: cute.Tensor,
    mV: cute.Tensor,
    mIndptr: cute.Tensor,
    mIdx: cute.Tensor,
    mLast: cute.Tensor,
    mPart: cute.Tensor,
    mPLse: cute.Tensor,
    scale2: cutlass.Float32,
):
    batch = cute.size(mQ, mode=[0])
    # two CTAs per SM: caps the registers at 128 a thread; carveout 100 keeps the max shared memory
    _partial_kernel(mQ, mK, mV, mIndptr, mIdx, mLast, mPart, mPLse, scale2).launch(
        grid=[batch * HKV * SPLITS, 1, 1], block=[THREADS, 1, 1], min_blocks_per_mp=2, preferred_smem_carveout=100
    )


@cute.jit
def _merge(mPart: cute.Tensor, mPLse: cute.Tensor, mO: cute.Tensor, mLse: cute.Tensor):
    batch = cute.size(mO, mode=[0])
    _merge_kernel(mPart, mPLse, mO, mLse).launch(grid=[batch * HQ // MERGE_WARPS, 1, 1], block=[MERGE_WARPS * 32, 1, 1])


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        batch, batch1, rows, nidx = cute.sym_int(), cute.sym_int(), cute.sym_int(), cute.sym_int()
        q = make_fake_compact_tensor(cutlass.BFloat16, (batch, HQ, D), stride_order=(2, 1, 0), assumed_align=16)
        kv = make_fake_compact_tensor(cutlass.BFloat16, (rows, HKV, D), stride_order=(2, 1, 0), assumed_align=16)
        indptr = make_fake_compact_tensor(cutlass.Int32, (batch1,), assumed_align=4)
        idx = make_fake_compact_tensor(cutlass.Int32, (nidx,), assumed_align=4)
        last = make_fake_compact_tensor(cutlass.Int32, (batch,), assumed_align=4)
        part = make_fake_compact_tensor(
            cutlass.Float32, (batch, HQ, SPLITS, D), stride_order=(3, 2, 1, 0), assumed_align=16
        )
        part_lse = make_fake_compact_tensor(
            cutlass.Float32, (batch, HQ, SPLITS), stride_order=(2, 1, 0), assumed_align=4
        )
        lse = make_fake_compact_tensor(cutlass.Float32, (batch, HQ), stride_order=(1, 0), assumed_align=4)
        opts = "--enable-tvm-ffi"
        _COMPILED.append(
            cute.compile(_partial, q, kv, kv, indptr, idx, last, part, part_lse, cutlass.Float32(1.0), options=opts)
        )
        _COMPILED.append(cute.compile(_merge, part, part_lse, q, lse, options=opts))
    return _COMPILED[0], _COMPILED[1]


def run(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    kv_last_page_len: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    partial, merge = _compiled()
    batch, pages = q.shape[0], k_cache.shape[0]
    out = torch.empty_like(q)
    lse = torch.empty((batch, HQ), dtype=torch.float32, device=q.device)
    part = torch.empty((batch, HQ, SPLITS, D), dtype=torch.float32, device=q.device)
    part_lse = torch.empty((batch, HQ, SPLITS), dtype=torch.float32, device=q.device)
    # the pool as token rows [pages * PS, HKV, D]; the scale carries log2(e) so the kernel works in base 2
    partial(
        q.contiguous(),
        k_cache.reshape(pages * PS, HKV, D),
        v_cache.reshape(pages * PS, HKV, D),
        kv_indptr.contiguous(),
        kv_indices.contiguous(),
        kv_last_page_len.contiguous(),
        part,
        part_lse,
        float(sm_scale) * LOG2E,
    )
    merge(part, part_lse, out, lse)
    return out, lse
