"""p45 capacity_factor_expert_dispatch_qwen3_coder_480b_bf16 — plan `routescanscatter`, CuTe DSL: three kernels.

Plan: (1) route: one warp per token, 8 tokens per 256-thread CTA; lane l owns experts l, l + 32, ...,
l + 128 (five coalesced bf16 loads per warp row, widened to float32). Eight rounds of a warp argmax
(butterfly over (logit, expert id), ties to the lower id) pick the top-8 experts; ranking the logits is
ranking the float32 softmax, which is monotone. The renormalised weight is exp(l_r − l_max) /
Σ_top8 exp(l_j − l_max): the softmax denominator cancels exactly in top_p / Σ top_p. Lane 0 writes the
8 ids (int32) and float32 weights to [T, 8] workspaces. (2) scan: one CTA of 1024 threads per expert
walks the tokens in order, 4096 per chunk (4 consecutive tokens per thread, 8 ids each read as 16-byte
vectors from L2); a thread counts the tokens that picked its expert, a warp inclusive scan (shfl.up)
plus a 32-entry shared-memory scan of the warp totals gives each thread its exclusive offset; added to
the running count of earlier chunks it is the slot. A kept assignment (slot < capacity) writes
token_index = token, combine_weights = bf16(weight) and slot_of[token, k] = slot; a dropped one writes
slot_of = -1. The CTA then fills the slots past min(count, capacity) with -1 / 0 and records that
count. (3) scatter: grid of 160 + T CTAs of 256 threads. The first 160 zero the unfilled rows of their
expert (16-byte stores). CTA 160 + t reads token t's hidden row once into registers (3 × 16-byte loads
per thread for hidden 6144) and stores it to each of its kept (expert, slot) rows, so hidden_states
crosses HBM exactly once and every dispatched row is written once: the kernel moves the compulsory
~50 MB in and ~503 MB out and dominates; route and scan touch ~3 MB. The hidden rows travel as
[rows · hidden / 8, 8] views so every access is one aligned 16-byte vector whatever the hidden size.
All sizes are symbolic: one compilation (three launches from one jit function), cached.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor
from cutlass.memory.smem import SmemAllocator

EXPERTS = 160
TOP_K = 8
VEC = 8  # bf16 per 16-byte access
NEG_BIG = -3.0e38  # below every logit
# route kernel
ROUTE_THREADS = 256
TOKENS_PER_CTA = ROUTE_THREADS // 32
PER_LANE = EXPERTS // 32
# scan kernel
SCAN_THREADS = 1024
SCAN_WARPS = SCAN_THREADS // 32  # 32: the warp totals are scanned by one warp
ITEMS = 4  # consecutive tokens per thread
CHUNK = SCAN_THREADS * ITEMS
# scatter kernel
COPY_THREADS = 256
COPY_ITERS = 3  # 16-byte vectors per thread per pass: 256 · 3 · 8 = 6144 = one production row


def expert_capacity(tokens: int) -> int:
    """ceil(1.25 * tokens * TOP_K / EXPERTS) in exact integer arithmetic (the problem's formula)."""
    return -(-(tokens * TOP_K * 5) // (EXPERTS * 4))


@cute.kernel
def _route_kernel(mL: cute.Tensor, mIds: cute.Tensor, mW: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    tokens = cute.size(mL, mode=[0])
    tok = bidx * TOKENS_PER_CTA + tidx // 32
    lane = tidx % 32
    rL = cute.make_rmem_tensor((PER_LANE,), cutlass.Float32)
    rL.fill(0.0)
    if tok < tokens:
        for i in cutlass.range_constexpr(PER_LANE):
            rL[i] = cutlass.Float32(mL[tok, i * 32 + lane])
    rV = cute.make_rmem_tensor((TOP_K,), cutlass.Float32)
    rIds = cute.make_rmem_tensor((TOP_K,), cutlass.Int32)
    for r in cutlass.range_constexpr(TOP_K):
        best = cutlass.Float32(NEG_BIG)
        best_id = cutlass.Int32(EXPERTS)
        # ids grow with i, so the strict test keeps the lower id of equal logits
        for i in cutlass.range_constexpr(PER_LANE):
            if rL[i] > best:
                best = rL[i]
                best_id = cutlass.Int32(i * 32) + lane
        for k in cutlass.range_constexpr(5):
            ov = cute.arch.shuffle_sync_bfly(best, offset=16 >> k)
            oi = cute.arch.shuffle_sync_bfly(best_id, offset=16 >> k)
            if ov > best or (ov == best and oi < best_id):
                best = ov
                best_id = oi
        rV[r] = best
        rIds[r] = best_id
        # the owner removes the winner from its candidates
        for i in cutlass.range_constexpr(PER_LANE):
            if best_id == i * 32 + lane:
                rL[i] = cutlass.Float32(NEG_BIG)
    rE = cute.make_rmem_tensor((TOP_K,), cutlass.Float32)
    total = cutlass.Float32(0.0)
    for r in cutlass.range_constexpr(TOP_K):
        rE[r] = cute.math.exp(rV[r] - rV[0])
        total = total + rE[r]
    if tok < tokens and lane == 0:
        for r in cutlass.range_constexpr(TOP_K):
            mIds[tok, r] = rIds[r]
            mW[tok, r] = rE[r] / total


@cute.kernel
def _scan_kernel(
    mIds: cute.Tensor, mW: cute.Tensor, mTI: cute.Tensor, mCW: cute.Tensor, mSlot: cute.Tensor, mCnt: cute.Tensor
):
    tidx, _, _ = cute.arch.thread_idx()
    e, _, _ = cute.arch.block_idx()
    tokens = cute.size(mIds, mode=[0])
    cap = cute.size(mTI, mode=[1])
    lane = tidx % 32
    warp = tidx // 32
    smem = SmemAllocator()
    sm = smem.allocate_tensor(cutlass.Int32, cute.make_layout((SCAN_WARPS + 1,)), byte_alignment=16)
    rI = [cute.make_rmem_tensor((TOP_K,), cutlass.Int32) for _ in range(ITEMS)]
    rPos = cute.make_rmem_tensor((ITEMS,), cutlass.Int32)
    running = cutlass.Int32(0)
    for it in cutlass.range((tokens + CHUNK - 1) // CHUNK):
        base = it * CHUNK + tidx * ITEMS
        for j in cutlass.range_constexpr(ITEMS):
            rI[j].fill(-1)
            if base + j < tokens:
                cute.autovec_copy(mIds[base + j, None], rI[j])
        cnt = cutlass.Int32(0)
        for j in cutlass.range_constexpr(ITEMS):
            rPos[j] = cutlass.Int32(-1)
            for k in cutlass.range_constexpr(TOP_K):
                if rI[j][k] == e:
                    rPos[j] = cutlass.Int32(k)
            if rPos[j] >= 0:
                cnt = cnt + 1
        # inclusive scan of the counts over the warp
        incl = cnt
        for d in cutlass.range_constexpr(5):
            up = cute.arch.shuffle_sync_up(incl, offset=1 << d)
            if lane >= (1 << d):
                incl = incl + up
        if lane == 31:
            sm[warp] = incl
        cute.arch.sync_threads()
        # warp 0 turns the 32 warp totals into exclusive offsets and the chunk total
        if warp == 0:
            wt = sm[lane]
            wincl = wt
            for d in cutlass.range_constexpr(5):
                wup = cute.arch.shuffle_sync_up(wincl, offset=1 << d)
                if lane >= (1 << d):
                    wincl = wincl + wup
            sm[lane] = wincl - wt
            if lane == 31:
                sm[SCAN_WARPS] = wincl
        cute.arch.sync_threads()
        slot = running + sm[warp] + incl - cnt
        for j in cutlass.range_constexpr(ITEMS):
            if rPos[j] >= 0:
                if slot < cap:
                    mTI[e, slot] = base + j
                    mCW[e, slot] = mW[base + j, rPos[j]].to(cutlass.BFloat16)
                    mSlot[base + j, rPos[j]] = slot
                else:
                    mSlot[base + j, rPos[j]] = cutlass.Int32(-1)
                slot = slot + 1
        running = running + sm[SCAN_WARPS]
        # every thread has read sm before the next chunk overwrites it
        cute.arch.sync_threads()
    filled = running
    if filled > cap:
        filled = cap
    if tidx == 0:
        mCnt[e] = filled
    for i in cutlass.range((cap + SCAN_THREADS - 1) // SCAN_THREADS):
        s = i * SCAN_THREADS + tidx
        if s < cap and s >= filled:
            mTI[e, s] = cutlass.Int32(-1)
            mCW[e, s] = cutlass.BFloat16(0.0)


@cute.kernel
def _scatter_kernel(
    mH: cute.Tensor,
    mIds: cute.Tensor,
    mSlot: cute.Tensor,
    mCnt: cute.Tensor,
    mOut: cute.Tensor,
    cap: cutlass.Int32,
    nvec: cutlass.Int32,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    npass = (nvec + COPY_THREADS * COPY_ITERS - 1) // (COPY_THREADS * COPY_ITERS)
    rBuf = [cute.make_rmem_tensor((VEC,), cutlass.BFloat16) for _ in range(COPY_ITERS)]
    if bidx < EXPERTS:
        # zero the unfilled rows cnt .. cap - 1 of expert bidx
        for i in cutlass.range_constexpr(COPY_ITERS):
            rBuf[i].fill(0.0)
        filled = mCnt[bidx]
        for r in cutlass.range(cap - filled):
            dst = cutlass.Int64(bidx * cap + filled + r) * nvec
            for p in cutlass.range(npass):
                for i in cutlass.range_constexpr(COPY_ITERS):
                    v = (p * COPY_ITERS + i) * COPY_THREADS + tidx
                    if v < nvec:
                        cute.autovec_copy(rBuf[i], mOut[dst + v, None])
    else:
        # token t: read its hidden row once, write it to each kept (expert, slot)
        t = bidx - EXPERTS
        rE = cute.make_rmem_tensor((TOP_K,), cutlass.Int32)
        rS = cute.make_rmem_tensor((TOP_K,), cutlass.Int32)
        cute.autovec_copy(mIds[t, None], rE)
        cute.autovec_copy(mSlot[t, None], rS)
        src = cutlass.Int64(t) * nvec
        for p in cutlass.range(npass):
            # all loads of the pass first, then all stores
            for i in cutlass.range_constexpr(COPY_ITERS):
                v = (p * COPY_ITERS + i) * COPY_THREADS + tidx
                if v < nvec:
                    cute.autovec_copy(mH[src + v, None], rBuf[i])
            for j in cutlass.range_constexpr(TOP_K):
                if rS[j] >= 0:
                    dst = cutlass.Int64(rE[j] * cap + rS[j]) * nvec
                    for i in cutlass.range_constexpr(COPY_ITERS):
                        v = (p * COPY_ITERS + i) * COPY_THREADS + tidx
                        if v < nvec:
                            cute.autovec_copy(rBuf[i], mOut[dst + v, None])


@cute.jit
def _dispatch(
    mL: cute.Tensor,
    mIds: cute.Tensor,
    mW: cute.Tensor,
    mTI: cute.Tensor,
    mCW: cute.Tensor,
    mSlot: cute.Tensor,
    mCnt: cute.Tensor,
    mH: cute.Tensor,
    mOut: cute.Tensor,
    nvec: cutlass.Int32,
):
    tokens = cute.size(mL, mode=[0])
    cap = cute.size(mTI, mode=[1])
    _route_kernel(mL, mIds, mW).launch(
        grid=[(tokens + TOKENS_PER_CTA - 1) // TOKENS_PER_CTA, 1, 1], block=[ROUTE_THREADS, 1, 1]
    )
    _scan_kernel(mIds, mW, mTI, mCW, mSlot, mCnt).launch(grid=[EXPERTS, 1, 1], block=[SCAN_THREADS, 1, 1])
    _scatter_kernel(mH, mIds, mSlot, mCnt, mOut, cap, nvec).launch(
        grid=[EXPERTS + tokens, 1, 1], block=[COPY_THREADS, 1, 1]
    )


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        tokens, cap = cute.sym_int(), cute.sym_int()
        # 64-bit row counts and row indices: the dispatched buffer passes 2^31 elements near 8.5k tokens
        hrows, orows = cute.sym_int(64), cute.sym_int(64)
        logits = make_fake_compact_tensor(cutlass.BFloat16, (tokens, EXPERTS), stride_order=(1, 0), assumed_align=16)
        ids = make_fake_compact_tensor(cutlass.Int32, (tokens, TOP_K), stride_order=(1, 0), assumed_align=16)
        weights = make_fake_compact_tensor(cutlass.Float32, (tokens, TOP_K), stride_order=(1, 0), assumed_align=16)
        token_index = make_fake_compact_tensor(cutlass.Int32, (EXPERTS, cap), stride_order=(1, 0), assumed_align=4)
        combine = make_fake_compact_tensor(cutlass.BFloat16, (EXPERTS, cap), stride_order=(1, 0), assumed_align=2)
        slots = make_fake_compact_tensor(cutlass.Int32, (tokens, TOP_K), stride_order=(1, 0), assumed_align=16)
        counts = make_fake_compact_tensor(cutlass.Int32, (EXPERTS,), assumed_align=4)
        # hidden rows as [rows * hidden / 8, 8]: one 16-byte vector per row of the view
        hid = make_fake_compact_tensor(cutlass.BFloat16, (hrows, VEC), stride_order=(1, 0), assumed_align=16)
        out = make_fake_compact_tensor(cutlass.BFloat16, (orows, VEC), stride_order=(1, 0), assumed_align=16)
        _COMPILED.append(
            cute.compile(
                _dispatch,
                logits,
                ids,
                weights,
                token_index,
                combine,
                slots,
                counts,
                hid,
                out,
                cutlass.Int32(1),
                options="--enable-tvm-ffi",
            )
        )
    return _COMPILED[0]


def run(hidden_states: torch.Tensor, router_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    kernel = _compiled()
    tokens, hidden = hidden_states.shape
    cap = expert_capacity(tokens)
    nvec = hidden // VEC
    dev = hidden_states.device
    ids = torch.empty((tokens, TOP_K), dtype=torch.int32, device=dev)
    weights = torch.empty((tokens, TOP_K), dtype=torch.float32, device=dev)
    slots = torch.empty((tokens, TOP_K), dtype=torch.int32, device=dev)
    counts = torch.empty((EXPERTS,), dtype=torch.int32, device=dev)
    token_index = torch.empty((EXPERTS, cap), dtype=torch.int32, device=dev)
    combine = torch.empty((EXPERTS, cap), dtype=torch.bfloat16, device=dev)
    dispatched = torch.empty((EXPERTS, cap, hidden), dtype=torch.bfloat16, device=dev)
    kernel(
        router_logits.contiguous(),
        ids,
        weights,
        token_index,
        combine,
        slots,
        counts,
        hidden_states.contiguous().view(tokens * nvec, VEC),
        dispatched.view(EXPERTS * cap * nvec, VEC),
        nvec,
    )
    return dispatched, combine, token_index
