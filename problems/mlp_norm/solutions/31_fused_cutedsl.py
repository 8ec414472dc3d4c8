"""p31 groupnorm_sd15_fp32 — plan `fused`, CuTe DSL: split statistics kernel + normalise kernel.

Plan: the NCHW input is viewed as [batch·32 groups, 20·H·W] float32 (a group's 20 channels are one
contiguous span; 20·H·W is a multiple of 4, so every group starts 16-byte aligned). The span is cut
into chunks of 1024 float4 vectors (16 KiB; 20 chunks per group at 64×64), one chunk per CTA of
256 threads (thread t loads vectors t, t+256, t+512, t+768: coalesced 16-byte loads, four in
flight), so 5120 CTAs fill all 132 SMs although there are only 256 (sample, group) pairs.
Kernel 1 writes per chunk its mean m_c and M2_c = Σ(x − m_c)² (two CTA reductions: butterfly
shuffles, 8 warp partials in shared memory, one barrier each; exact two-pass inside the chunk).
Kernel 2 (same chunk per CTA, CTAs taken in reverse order so its first reads hit what kernel 1 left
in L2) issues its chunk's loads, then every warp merges the group's partials with Chan's formula
(lane j holds chunk j: mean = Σ n_j m_j / N, M2 = Σ M2_j + n_j (m_j − mean)², shuffles),
rstd = 1 / sqrt(M2/N + 1e-5) with IEEE division and square root, and writes
y = (x − mean)·(rstd·w[c]) + b[c] with 16-byte stores (one channel per vector when H·W % 4 == 0,
else per element). Traffic: x read twice (second read partly from L2), y written once. The group
count is symbolic; H·W is static (one compilation per H·W, cached).
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor
from cutlass.memory.smem import SmemAllocator

NUM_GROUPS = 32
CPG = 20  # channels per group (640 / 32)
CHANNELS = NUM_GROUPS * CPG
VEC = 4  # float32 per 16-byte access
PER = 4  # vectors per thread
THREADS = 256
WARPS = THREADS // 32
CHUNK = THREADS * PER  # vectors per CTA
EPS = 1e-5
DEFAULT_HW = 64 * 64  # the production feature map (compiled by _compiled() without arguments)


def _nchunk(hw: int) -> int:
    return (CPG * hw // VEC + CHUNK - 1) // CHUNK


@cute.jit
def _cta_sum(v: cutlass.Float32, lane: cutlass.Int32, warp: cutlass.Int32, sRed: cute.Tensor) -> cutlass.Float32:
    for i in cutlass.range_constexpr(5):
        v = v + cute.arch.shuffle_sync_bfly(v, offset=16 >> i)
    if lane == 0:
        sRed[warp] = v
    cute.arch.sync_threads()
    # every warp reduces the 8 partials itself (lanes 8..31 mirror lanes 0..7)
    t = sRed[lane % WARPS]
    for i in cutlass.range_constexpr(3):
        t = t + cute.arch.shuffle_sync_bfly(t, offset=(WARPS // 2) >> i)
    return t


@cute.jit
def _load_chunk(
    gX: cute.Tensor, rX: cute.Tensor, gi: cutlass.Int32, s: cutlass.Int32, tidx: cutlass.Int32, l4: cutlass.Constexpr
):
    rX.fill(0.0)
    for j in cutlass.range_constexpr(PER):
        v = s * CHUNK + j * THREADS + tidx
        if cutlass.const_expr(l4 % CHUNK == 0):
            cute.autovec_copy(gX[(0, None), (gi, v)], rX[None, j])
        else:
            if v < l4:
                cute.autovec_copy(gX[(0, None), (gi, v)], rX[None, j])


@cute.kernel
def _stats_kernel(mX: cute.Tensor, mP: cute.Tensor):
    span = cute.size(mX, mode=[1])  # static
    l4 = span // VEC
    nchunk = cute.size(mP, mode=[1])  # static
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    gi = bidx // nchunk
    s = bidx % nchunk
    lane = tidx % 32
    warp = tidx // 32
    smem = SmemAllocator()
    sA = smem.allocate_tensor(cutlass.Float32, cute.make_layout(WARPS), byte_alignment=16)
    sB = smem.allocate_tensor(cutlass.Float32, cute.make_layout(WARPS), byte_alignment=16)
    gX = cute.zipped_divide(mX, (1, VEC))  # ((1, VEC), (groups, l4))
    rX = cute.make_rmem_tensor((VEC, PER), cutlass.Float32)
    _load_chunk(gX, rX, gi, s, tidx, l4)
    x = rX.load()
    tot = _cta_sum(x.reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), reduction_profile=0), lane, warp, sA)
    cnt = cutlass.Int32(cutlass.min(CHUNK, l4 - s * CHUNK)) * VEC
    mean_c = tot / cutlass.Float32(cnt)
    m2 = cutlass.Float32(0.0)
    for j in cutlass.range_constexpr(PER):
        d = rX[None, j].load() - mean_c
        part = (d * d).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), reduction_profile=0)
        if cutlass.const_expr(l4 % CHUNK == 0):
            m2 = m2 + part
        else:
            if s * CHUNK + j * THREADS + tidx < l4:
                m2 = m2 + part
    # a separate scratch: a fast warp may write it while others still read sA
    m2 = _cta_sum(m2, lane, warp, sB)
    if tidx == 0:
        mP[gi, s, 0] = mean_c
        mP[gi, s, 1] = m2


@cute.kernel
def _norm_kernel(mX: cute.Tensor, mP: cute.Tensor, mW: cute.Tensor, mB: cute.Tensor, mY: cute.Tensor):
    span = cute.size(mX, mode=[1])  # static
    l4 = span // VEC
    hw = span // CPG
    nchunk = cute.size(mP, mode=[1])  # static
    groups = cute.size(mP, mode=[0])
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    blk = groups * nchunk - 1 - bidx  # reverse order: the chunks kernel 1 read last come first
    gi = blk // nchunk
    s = blk % nchunk
    cbase = (gi % NUM_GROUPS) * CPG
    lane = tidx % 32
    gX = cute.zipped_divide(mX, (1, VEC))
    gY = cute.zipped_divide(mY, (1, VEC))
    # 1) the chunk's loads first
    rX = cute.make_rmem_tensor((VEC, PER), cutlass.Float32)
    _load_chunk(gX, rX, gi, s, tidx, l4)
    # 2) group statistics from the chunk partials (every warp; all lanes shuffle)
    rounds = (nchunk + 31) // 32
    tsum = cutlass.Float32(0.0)
    for jj in cutlass.range_constexpr(rounds):
        j = lane + 32 * jj
        if j < nchunk:
            nj = cutlass.Float32(cutlass.Int32(cutlass.min(CHUNK, l4 - j * CHUNK)) * VEC)
            tsum = tsum + nj * mP[gi, j, 0]
    for i in cutlass.range_constexpr(5):
        tsum = tsum + cute.arch.shuffle_sync_bfly(tsum, offset=16 >> i)
    mean = tsum / cutlass.Float32(span)
    q = cutlass.Float32(0.0)
    for jj in cutlass.range_constexpr(rounds):
        j = lane + 32 * jj
        if j < nchunk:
            nj = cutlass.Float32(cutlass.Int32(cutlass.min(CHUNK, l4 - j * CHUNK)) * VEC)
            dm = mP[gi, j, 0] - mean
            q = q + (mP[gi, j, 1] + nj * dm * dm)
    for i in cutlass.range_constexpr(5):
        q = q + cute.arch.shuffle_sync_bfly(q, offset=16 >> i)
    rstd = cutlass.Float32(1.0) / cute.math.sqrt(q / cutlass.Float32(span) + cutlass.Float32(EPS))
    # 3) normalise + affine, 16-byte stores
    rY = cute.make_rmem_tensor((VEC, PER), cutlass.Float32)
    for j in cutlass.range_constexpr(PER):
        v = s * CHUNK + j * THREADS + tidx
        if v < l4:
            if cutlass.const_expr(hw % VEC == 0):
                c = cbase + (v * VEC) // hw
                a = rstd * mW[c]
                rY[None, j].store((rX[None, j].load() - mean) * a + mB[c])
            else:
                for i in cutlass.range_constexpr(VEC):
                    ce = cbase + (v * VEC + i) // hw
                    rY[i, j] = (rX[i, j] - mean) * (rstd * mW[ce]) + mB[ce]
            cute.autovec_copy(rY[None, j], gY[(0, None), (gi, v)])


@cute.jit
def _stats(mX: cute.Tensor, mP: cute.Tensor):
    blocks = cute.size(mP, mode=[0]) * cute.size(mP, mode=[1])
    _stats_kernel(mX, mP).launch(grid=[blocks, 1, 1], block=[THREADS, 1, 1])


@cute.jit
def _norm(mX: cute.Tensor, mP: cute.Tensor, mW: cute.Tensor, mB: cute.Tensor, mY: cute.Tensor):
    blocks = cute.size(mP, mode=[0]) * cute.size(mP, mode=[1])
    _norm_kernel(mX, mP, mW, mB, mY).launch(grid=[blocks, 1, 1], block=[THREADS, 1, 1])


_COMPILED: dict[int, tuple] = {}


def _compiled(hw: int = DEFAULT_HW):
    kernels = _COMPILED.get(hw)
    if kernels is None:
        groups = cute.sym_int()
        x = make_fake_compact_tensor(cutlass.Float32, (groups, CPG * hw), stride_order=(1, 0), assumed_align=16)
        p = make_fake_compact_tensor(
            cutlass.Float32, (groups, _nchunk(hw), 2), stride_order=(2, 1, 0), assumed_align=16
        )
        w = make_fake_compact_tensor(cutlass.Float32, (CHANNELS,), assumed_align=16)
        kernels = _COMPILED[hw] = (
            cute.compile(_stats, x, p, options="--enable-tvm-ffi"),
            cute.compile(_norm, x, p, w, w, x, options="--enable-tvm-ffi"),
        )
    return kernels


def run(hidden_states: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    b, _c, h, w = hidden_states.shape
    hw = h * w
    stats_k, norm_k = _compiled(hw)
    groups = b * NUM_GROUPS
    x = hidden_states.contiguous().view(groups, CPG * hw)
    part = torch.empty((groups, _nchunk(hw), 2), dtype=torch.float32, device=x.device)
    stats_k(x, part)
    out = torch.empty_like(hidden_states, memory_format=torch.contiguous_format)
    norm_k(x, part, weight.contiguous(), bias.contiguous(), out.view(groups, CPG * hw))
    return out
