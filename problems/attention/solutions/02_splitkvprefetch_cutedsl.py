"""p02 gqa_paged_decode_h5_kv1_d128_ps1_bf16 — plan `splitkvprefetch`, CuTe DSL: `splitkv`, page indices early.

Plan `splitkv` loaded a step's page indices and only then its K and V rows: two dependent memory round
trips per step of 32 tokens, and a slice is about four steps (128 tokens at the production shape), so
the CTA spent most of its life waiting. Here each lane loads the page indices of its next step's 4
tokens while this step's K and V loads are in flight (4 registers, first used a step later), so a step
waits on one round trip. Everything else is plan `splitkv`: with one KV head, one CTA per (sequence, KV
head) would be only batch = 128 CTAs for 132 SMs, so every sequence is cut into SPLITS = 16 equal
slices: the grid is batch × 16 = 2048 CTAs of 128 threads (about five waves of three per SM, which the
block scheduler balances across sequences of unequal length). Kernel 1: one CTA per (sequence, slice)
serves the slice's tokens for all 5 query heads, so every K/V row is read once from HBM. Its 8
half-warps stream tokens four at a time (K and V 16-byte loads, all issued before any
math); a lane owns 8 of the 128 dims and holds the 5 query rows in float32, pre-scaled by
sm_scale·log2(e) so the logits are base 2; q·k is reduced over the 16 lanes with butterfly shuffles;
each half-warp keeps a base-2 online softmax (running max, sum, 5×8 float32 accumulators per lane),
rescaled once per 4 tokens. Tokens past the slice end load zeros and still shuffle (full-mask shuffles
stay converged); their probability is multiplied by 0. The 8 partial states are merged through shared
memory (20 KiB; thread = dim) into the slice's normalised float32 output and base-2 lse (an empty slice,
in a sequence shorter than 16 tokens, writes zeros and lse = −3e38). Kernel 2: one CTA of 5 warps per
sequence, a warp per query head, a lane owning 4 dims (one 16-byte load per slice): M = max lse_s, w_s =
2^(lse_s − M), out = Σ w_s·O_s / Σ w_s (bf16), lse = M + log2(Σ w_s). The float32 partials (5.2 MB) are
small beside the 134 MB of K/V. Float32 throughout; only the output is rounded to bf16. Symbolic sizes:
one compilation of each kernel, cached, called with torch tensors through TVM FFI.
"""

import math

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor
from cutlass.memory.smem import SmemAllocator

HQ = 5
HKV = 1
GROUP = HQ // HKV  # query heads per KV head
D = 128
VEC = 8  # bf16 per 16-byte load
LANES = D // VEC  # lanes per token row
THREADS = 128  # == D: in the in-CTA merge a thread owns one dim
ROWS = THREADS // LANES  # half-warps per CTA
UNROLL = 4  # tokens per half-warp per step
STEP = ROWS * UNROLL  # tokens per CTA per step
SPLITS = 16  # slices per (sequence, KV head)
MERGE_VEC = D // 32  # dims per lane in the merge kernel
LOG2E = 1.0 / math.log(2.0)
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
    rAhead = cute.make_rmem_tensor((UNROLL,), cutlass.Int32)  # page indices of the next step's tokens (-1: none)
    rK = [cute.make_rmem_tensor((VEC,), cutlass.BFloat16) for _ in range(UNROLL)]
    rV = [cute.make_rmem_tensor((VEC,), cutlass.BFloat16) for _ in range(UNROLL)]
    rM.fill(NEG_BIG)
    rL.fill(0.0)
    rAcc.fill(0.0)
    # slice sp of the sequence: tokens [lo, hi) with lo = min(sp * per, len), hi = min((sp + 1) * per, len)
    seq_start = mIndptr[b]
    seq_len = mIndptr[b + 1] - seq_start
    per_split = (seq_len + SPLITS - 1) // SPLITS
    lo = cutlass.min(sp * per_split, seq_len)
    hi = cutlass.min((sp + 1) * per_split, seq_len)
    start = seq_start + lo
    length = hi - lo
    for u in cutlass.range_constexpr(UNROLL):
        rAhead[u] = cutlass.Int32(-1)
        if u * ROWS + row < length:
            rAhead[u] = mIdx[start + u * ROWS + row]
    for it in cutlass.range((length + STEP - 1) // STEP):
        # page indices loaded a step ahead, then both K and V rows
        for u in cutlass.range_constexpr(UNROLL):
            rP[u] = rAhead[u]
        for u in cutlass.range_constexpr(UNROLL):
            rK[u].fill(0.0)
            rV[u].fill(0.0)
            if rP[u] >= 0:
                cute.autovec_copy(gK[(0, 0, None), (rP[u], kvh, lane)], rK[u])
                cute.autovec_copy(gV[(0, 0, None), (rP[u], kvh, lane)], rV[u])
        # the next step's page indices, in flight with this step's K and V (used a step later)
        for u in cutlass.range_constexpr(UNROLL):
            t = (it + 1) * STEP + u * ROWS + row
            rAhead[u] = cutlass.Int32(-1)
            if t < length:
                rAhead[u] = mIdx[start + t]
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
    # merge the 8 half-warps: thread tidx owns dim tidx of every head
    for h in cutlass.range_constexpr(GROUP):
        big = cutlass.Float32(NEG_BIG)
        for g in cutlass.range_constexpr(ROWS):
            big = cute.arch.fmax(big, sM[g, h])
        total = cutlass.Float32(0.0)
        o = cutlass.Float32(0.0)
        for g in cutlass.range_constexpr(ROWS):
            w = cute.math.exp2(sM[g, h] - big, fastmath=True)
            total = total + sL[g, h] * w
            o = o + sAcc[g, h, tidx] * w
        # an empty slice (a sequence shorter than SPLITS tokens) has total == 0: zeros, lse = NEG_BIG
        inv = cutlass.Float32(0.0)
        part_lse = cutlass.Float32(NEG_BIG)
        if total > cutlass.Float32(0.0):
            inv = cutlass.Float32(1.0) / total
            part_lse = big + cute.math.log2(total)
        mPart[b, kvh * GROUP + h, sp, tidx] = o * inv
        if tidx == 0:
            mPLse[b, kvh * GROUP + h, sp] = part_lse


@cute.kernel
def _merge_kernel(mPart: cute.Tensor, mPLse: cute.Tensor, mO: cute.Tensor, mLse: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    b, _, _ = cute.arch.block_idx()
    h = tidx // 32
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
    mPart: cute.Tensor,
    mPLse: cute.Tensor,
    scale2: cutlass.Float32,
):
    batch = cute.size(mQ, mode=[0])
    # three CTAs per SM: caps the registers at 170 a thread; carveout 100 keeps the max shared memory
    _partial_kernel(mQ, mK, mV, mIndptr, mIdx, mPart, mPLse, scale2).launch(
        grid=[batch * HKV * SPLITS, 1, 1], block=[THREADS, 1, 1], min_blocks_per_mp=3, preferred_smem_carveout=100
    )


@cute.jit
def _merge(mPart: cute.Tensor, mPLse: cute.Tensor, mO: cute.Tensor, mLse: cute.Tensor):
    batch = cute.size(mO, mode=[0])
    _merge_kernel(mPart, mPLse, mO, mLse).launch(grid=[batch, 1, 1], block=[HQ * 32, 1, 1])


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        batch, batch1, pages, nidx = cute.sym_int(), cute.sym_int(), cute.sym_int(), cute.sym_int()
        q = make_fake_compact_tensor(cutlass.BFloat16, (batch, HQ, D), stride_order=(2, 1, 0), assumed_align=16)
        kv = make_fake_compact_tensor(cutlass.BFloat16, (pages, HKV, D), stride_order=(2, 1, 0), assumed_align=16)
        indptr = make_fake_compact_tensor(cutlass.Int32, (batch1,), assumed_align=4)
        idx = make_fake_compact_tensor(cutlass.Int32, (nidx,), assumed_align=4)
        part = make_fake_compact_tensor(
            cutlass.Float32, (batch, HQ, SPLITS, D), stride_order=(3, 2, 1, 0), assumed_align=16
        )
        part_lse = make_fake_compact_tensor(
            cutlass.Float32, (batch, HQ, SPLITS), stride_order=(2, 1, 0), assumed_align=4
        )
        lse = make_fake_compact_tensor(cutlass.Float32, (batch, HQ), stride_order=(1, 0), assumed_align=4)
        opts = "--enable-tvm-ffi"
        _COMPILED.append(
            cute.compile(_partial, q, kv, kv, indptr, idx, part, part_lse, cutlass.Float32(1.0), options=opts)
        )
        _COMPILED.append(cute.compile(_merge, part, part_lse, q, lse, options=opts))
    return _COMPILED[0], _COMPILED[1]


def run(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    partial, merge = _compiled()
    batch, pages = q.shape[0], k_cache.shape[0]
    out = torch.empty_like(q)
    lse = torch.empty((batch, HQ), dtype=torch.float32, device=q.device)
    part = torch.empty((batch, HQ, SPLITS, D), dtype=torch.float32, device=q.device)
    part_lse = torch.empty((batch, HQ, SPLITS), dtype=torch.float32, device=q.device)
    # page size 1: the pool is [pages, HKV, D]; the scale carries log2(e) so the kernel works in base 2
    partial(
        q.contiguous(),
        k_cache.reshape(pages, HKV, D),
        v_cache.reshape(pages, HKV, D),
        kv_indptr.contiguous(),
        kv_indices.contiguous(),
        part,
        part_lse,
        float(sm_scale) * LOG2E,
    )
    merge(part, part_lse, out, lse)
    return out, lse
