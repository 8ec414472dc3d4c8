"""p48 top10_shared_gate_qwen3next_bf16 — plan `fused`, CuTe DSL: route kernel + grouped-GEMM pipeline.

Plan: (1) route: one warp per token, lane l owns experts 32 i + l (i < 16, coalesced bf16 loads); 10
rounds of a warp argmax on the logits (the softmax is monotone; ties to the lower id) pick the experts,
and their weights are exp(l - l_max) / sum over the 10 of exp(l_j - l_max) (the softmax denominator
cancels in p / sum p). Lane 0 records each chosen expert that is local with its weight and its rank
among the expert's rows (atomicAdd on the expert's count), -1 otherwise. The same warp forms the shared
gate sigmoid(w_gate . x) (16-byte loads, butterfly sum). (2) The grouped-GEMM pipeline of
`_moe_cutedsl.py`: scan -> scatter of the hidden rows into 128-row expert tiles (the shared expert is
one more segment over all tokens, its rows weighted by the shared gate) -> GEMM1 (m64n128 bf16 WGMMAs
on the gate and up tiles, TMA, SwiGLU in the epilogue) -> GEMM2 (m64n256 WGMMAs, row weight in the
epilogue) -> combine (float32 sum of the token's rows, one bf16 rounding). Symbolic sizes: compiled once.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor

from problems.moe.solutions import _moe_cutedsl as M

EXPERTS = 512
LOCAL = 64
TOP_K = 10
PER_LANE = EXPERTS // 32
THREADS = 256
TOKENS_PER_CTA = THREADS // 32
VEC = 8
NEG_BIG = -3.0e38


@cute.kernel
def _route_kernel(
    mL: cute.Tensor, mX: cute.Tensor, mG: cute.Tensor, offset: cutlass.Int32, mPE: cute.Tensor,
    mPW: cute.Tensor, mPS: cute.Tensor, mCNT: cute.Tensor, mSG: cute.Tensor,
):  # fmt: skip
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    tokens = cute.size(mL, mode=[0])
    tok = bidx * TOKENS_PER_CTA + tidx // 32
    lane = tidx % 32
    row = cutlass.min(tok, tokens - 1)
    lv = [mL[row, i * 32 + lane].to(cutlass.Float32) for i in range(PER_LANE)]
    # shared gate: x . w over 16-byte vectors, lane l takes vectors l, l + 32, ...
    gX = cute.zipped_divide(mX, (1, VEC))
    gG = cute.zipped_divide(mG, (1, VEC))
    dot = cutlass.Float32(0.0)
    for c in cutlass.range(lane, cute.size(mX, mode=[1]) // VEC, 32, unroll=1):
        rX = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
        rG = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
        cute.autovec_copy(gX[(0, None), (row, c)], rX)
        cute.autovec_copy(gG[(0, None), (0, c)], rG)
        xf, gf = rX.load().to(cutlass.Float32), rG.load().to(cutlass.Float32)
        for v in cutlass.range_constexpr(VEC):
            dot = dot + xf[v] * gf[v]
    dot = cute.arch.warp_reduction_sum(dot)
    sel_id = []
    sel_v = []
    for _ in cutlass.range_constexpr(TOP_K):
        best = cutlass.Float32(NEG_BIG)
        best_id = cutlass.Int32(EXPERTS)
        # ids grow with i, so the strict test keeps the lower id of equal logits
        for i in cutlass.range_constexpr(PER_LANE):
            if lv[i] > best:
                best = lv[i]
                best_id = i * 32 + lane
        for k in cutlass.range_constexpr(5):
            ov = cute.arch.shuffle_sync_bfly(best, offset=16 >> k)
            oi = cute.arch.shuffle_sync_bfly(best_id, offset=16 >> k)
            if ov > best or (ov == best and oi < best_id):
                best = ov
                best_id = oi
        sel_id.append(best_id)
        sel_v.append(best)
        for i in cutlass.range_constexpr(PER_LANE):
            if best_id == i * 32 + lane:
                lv[i] = cutlass.Float32(NEG_BIG)
    ev = [cute.math.exp(v - sel_v[0]) for v in sel_v]
    total = cutlass.Float32(0.0)
    for r in cutlass.range_constexpr(TOP_K):
        total = total + ev[r]
    inv = cutlass.Float32(1.0) / total
    if tok < tokens and lane == 0:
        mSG[tok] = cutlass.Float32(1.0) / (cutlass.Float32(1.0) + cute.math.exp(-dot))
        for r in cutlass.range_constexpr(TOP_K):
            e = sel_id[r] - offset
            if e >= 0 and e < LOCAL:
                mPE[tok, r] = e
                mPS[tok, r] = cute.arch.atomic_add(mCNT.iterator + e, cutlass.Int32(1))
            else:
                mPE[tok, r] = cutlass.Int32(-1)
                mPS[tok, r] = cutlass.Int32(0)
            mPW[tok, r] = ev[r] * inv


@cute.jit
def _route(
    mL: cute.Tensor, mX: cute.Tensor, mG: cute.Tensor, offset: cutlass.Int32, mPE: cute.Tensor,
    mPW: cute.Tensor, mPS: cute.Tensor, mCNT: cute.Tensor, mSG: cute.Tensor,
):  # fmt: skip
    grid = (cute.size(mL, mode=[0]) + TOKENS_PER_CTA - 1) // TOKENS_PER_CTA
    _route_kernel(mL, mX, mG, offset, mPE, mPW, mPS, mCNT, mSG).launch(grid=[grid, 1, 1], block=[THREADS, 1, 1])


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        t, h = cute.sym_int(), cute.sym_int(divisibility=64)
        bf16, f32, i32 = cutlass.BFloat16, cutlass.Float32, cutlass.Int32
        logits = make_fake_compact_tensor(bf16, (t, EXPERTS), stride_order=(1, 0), assumed_align=16)
        x = make_fake_compact_tensor(bf16, (t, h), stride_order=(1, 0), assumed_align=16)
        gate = make_fake_compact_tensor(bf16, (1, h), stride_order=(1, 0), assumed_align=16)
        pe, ps = (make_fake_compact_tensor(i32, (t, TOP_K), stride_order=(1, 0), assumed_align=4) for _ in range(2))
        pw = make_fake_compact_tensor(f32, (t, TOP_K), stride_order=(1, 0), assumed_align=4)
        cnt = make_fake_compact_tensor(i32, (LOCAL,), assumed_align=4)
        sg = make_fake_compact_tensor(f32, (t,), assumed_align=4)
        route = cute.compile(_route, logits, x, gate, i32(0), pe, pw, ps, cnt, sg, options="--enable-tvm-ffi")
        _COMPILED.extend((route, *M.compiled(TOP_K, 1)))
    return _COMPILED


def run(
    hidden_states: torch.Tensor,
    router_logits: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    shared_w13: torch.Tensor,
    shared_w2: torch.Tensor,
    shared_gate_weight: torch.Tensor,
    local_expert_offset: int,
) -> torch.Tensor:
    route = _compiled()[0]
    tokens = hidden_states.shape[0]
    dev = hidden_states.device
    pair_e = torch.empty((tokens, TOP_K), dtype=torch.int32, device=dev)
    pair_w = torch.empty((tokens, TOP_K), dtype=torch.float32, device=dev)
    pair_s = torch.empty((tokens, TOP_K), dtype=torch.int32, device=dev)
    counts = torch.zeros(LOCAL, dtype=torch.int32, device=dev)
    shared_gate = torch.empty(tokens, dtype=torch.float32, device=dev)
    route(
        router_logits, hidden_states, shared_gate_weight, int(local_expert_offset),
        pair_e, pair_w, pair_s, counts, shared_gate,
    )  # fmt: skip
    return M.run_pipeline(
        TOP_K, hidden_states, pair_e, pair_w, pair_s, counts, shared_gate, w13, w2, shared_w13, shared_w2
    )
