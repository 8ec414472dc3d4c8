"""p03 gqa_paged_decode_h32_kv8_d128_ps64_bf16 — plan `pageprefetch`, CuTe DSL: `ctaperseqhead`, pages read early.

Plan `ctaperseqhead` loaded a step's kv_indices entries and only then its K and V rows: two dependent
memory round trips per step of 64 tokens. A step is one page (STEP = PS = 64): here each lane loads
the next page's entry while this step's K and V loads are in flight (one register, first used a step
later), so a step waits on one round trip. Everything else is plan `ctaperseqhead`:
batch × KV heads = 64 × 8 = 512 CTAs already fill the 132 SMs (two waves of two per SM), so one
CTA of 256 threads per (sequence, KV head), serving the 4 query heads of that KV head so every K/V row
is read once from HBM. The pool is viewed as rows [pages·64, 8, 128]: token t of sequence b is row
kv_indices[kv_indptr[b] + t / 64]·64 + t % 64, and the sequence holds (pages − 1)·64 +
kv_last_page_len[b] tokens. The CTA is 16 half-warps; half-warp g streams tokens g, g + 16, ... four at
a time (the four tokens' rows, K and V 16-byte loads are issued before any math). A lane owns 8 of the
128 dims: the 4 query rows are held in float32 registers, pre-multiplied by sm_scale·log2(e) so the
logits are already base 2; q·k is reduced over the 16 lanes with butterfly shuffles. Each half-warp
keeps an online softmax (running max m, sum l, 4×8 float32 accumulators per lane) in base 2, rescaled
once per 4 tokens. Tokens past the sequence end load zeros and still shuffle (full-mask shuffles stay
converged); their probability is multiplied by 0. At the end the 16 partial states go through shared
memory (32 KiB) and 256 threads merge them: M = max m_g, L = Σ l_g·2^(m_g−M), O = Σ acc_g·2^(m_g−M) / L,
lse = M + log2(L) (the base-2 log-sum-exp the problem asks for). Float32 throughout; only the output is
rounded to bf16. Symbolic sizes: one compilation, cached, called with torch tensors through TVM FFI.
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
def _decode_kernel(
    mQ: cute.Tensor,
    mK: cute.Tensor,
    mV: cute.Tensor,
    mIndptr: cute.Tensor,
    mIdx: cute.Tensor,
    mLast: cute.Tensor,
    mO: cute.Tensor,
    mLse: cute.Tensor,
    scale2: cutlass.Float32,
):
    tidx, _, _ = cute.arch.thread_idx()
    bh, _, _ = cute.arch.block_idx()
    b = bh // HKV
    kvh = bh % HKV
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
    start = mIndptr[b]
    # full pages plus the last page's kv_last_page_len tokens
    length = (mIndptr[b + 1] - start - 1) * PS + mLast[b]
    ahead = cutlass.Int32(0)  # the kv_indices entry of the next step's page
    if length > 0:
        ahead = mIdx[start]
    for it in cutlass.range((length + STEP - 1) // STEP):
        # pool rows (page·64 + slot) of step it = page it, whose entry was loaded a step ahead
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
    inv = cutlass.Float32(1.0) / total
    for i in cutlass.range_constexpr(OUT_PER_THREAD):
        mO[b, kvh * GROUP + oh, od + i] = (rOut[i] * inv).to(cutlass.BFloat16)
    if od == 0:
        mLse[b, kvh * GROUP + oh] = big + cute.math.log2(total)


@cute.jit
def _decode(
    mQ: cute.Tensor,
    mK: cute.Tensor,
    mV: cute.Tensor,
    mIndptr: cute.Tensor,
    mIdx: cute.Tensor,
    mLast: cute.Tensor,
    mO: cute.Tensor,
    mLse: cute.Tensor,
    scale2: cutlass.Float32,
):
    batch = cute.size(mQ, mode=[0])
    # two CTAs per SM: caps the registers at 128 a thread; carveout 100 keeps the max shared memory
    _decode_kernel(mQ, mK, mV, mIndptr, mIdx, mLast, mO, mLse, scale2).launch(
        grid=[batch * HKV, 1, 1], block=[THREADS, 1, 1], min_blocks_per_mp=2, preferred_smem_carveout=100
    )


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        batch, batch1, rows, nidx = cute.sym_int(), cute.sym_int(), cute.sym_int(), cute.sym_int()
        q = make_fake_compact_tensor(cutlass.BFloat16, (batch, HQ, D), stride_order=(2, 1, 0), assumed_align=16)
        kv = make_fake_compact_tensor(cutlass.BFloat16, (rows, HKV, D), stride_order=(2, 1, 0), assumed_align=16)
        indptr = make_fake_compact_tensor(cutlass.Int32, (batch1,), assumed_align=4)
        idx = make_fake_compact_tensor(cutlass.Int32, (nidx,), assumed_align=4)
        last = make_fake_compact_tensor(cutlass.Int32, (batch,), assumed_align=4)
        lse = make_fake_compact_tensor(cutlass.Float32, (batch, HQ), stride_order=(1, 0), assumed_align=4)
        _COMPILED.append(
            cute.compile(
                _decode, q, kv, kv, indptr, idx, last, q, lse, cutlass.Float32(1.0), options="--enable-tvm-ffi"
            )
        )
    return _COMPILED[0]


def run(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    kv_last_page_len: torch.Tensor,
    sm_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    kernel = _compiled()
    batch, pages = q.shape[0], k_cache.shape[0]
    out = torch.empty_like(q)
    lse = torch.empty((batch, HQ), dtype=torch.float32, device=q.device)
    # the pool as token rows [pages * PS, HKV, D]; the scale carries log2(e) so the kernel works in base 2
    kernel(
        q.contiguous(),
        k_cache.reshape(pages * PS, HKV, D),
        v_cache.reshape(pages * PS, HKV, D),
        kv_indptr.contiguous(),
        kv_indices.contiguous(),
        kv_last_page_len.contiguous(),
        out,
        lse,
        float(sm_scale) * LOG2E,
    )
    return out, lse
