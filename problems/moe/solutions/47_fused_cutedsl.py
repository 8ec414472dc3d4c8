"""p47 correction_bias_shared_expert_ernie_bf16 — plan `fused`, CuTe DSL: route kernel + grouped-GEMM pipeline.

Plan: (1) route: one warp per token, lane l owns experts l and l + 32 of the 64; float32 softmax
(warp max, exp, warp sum), then 6 rounds of a warp argmax on p + bias (ties to the lower id) pick the
experts; weights = p / max(sum of the 6 p, 1e-12). Lane 0 records each chosen expert that is local
(global id - offset in [0, 32)) with its weight and its rank among the expert's rows (atomicAdd on the
expert's count), -1 otherwise. (2) The grouped-GEMM pipeline of `_moe_cutedsl.py`: scan -> scatter of
the hidden rows into 128-row expert tiles (the shared MLP of intermediate 3072 is two segments of 1536
over all tokens, weight 1) -> GEMM1 (m64n128 bf16 WGMMAs on the gate and up tiles, TMA, SwiGLU in the
epilogue) -> GEMM2 (m64n256 WGMMAs, row weight in the epilogue) -> combine (float32 sum of the token's
rows, one bf16 rounding). Symbolic sizes: each kernel compiled once.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor

from problems.moe.solutions import _moe_cutedsl as M

EXPERTS = 64
LOCAL = 32
TOP_K = 6
NORM_MIN = 1e-12
THREADS = 256
TOKENS_PER_CTA = THREADS // 32
NEG_BIG = -3.0e38


@cute.kernel
def _route_kernel(
    mL: cute.Tensor, mB: cute.Tensor, offset: cutlass.Int32, mPE: cute.Tensor, mPW: cute.Tensor,
    mPS: cute.Tensor, mCNT: cute.Tensor,
):  # fmt: skip
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    tokens = cute.size(mL, mode=[0])
    tok = bidx * TOKENS_PER_CTA + tidx // 32
    lane = tidx % 32
    row = cutlass.min(tok, tokens - 1)
    p = [mL[row, lane], mL[row, lane + 32]]
    mx = cute.arch.warp_reduction_max(cute.arch.fmax(p[0], p[1]))
    p = [cute.math.exp(v - mx) for v in p]
    total = cute.arch.warp_reduction_sum(p[0] + p[1])
    p = [v / total for v in p]
    c = [p[i] + mB[lane + 32 * i] for i in range(2)]
    sel_id = []
    sel_p = []
    for _ in cutlass.range_constexpr(TOP_K):
        best = cutlass.Float32(NEG_BIG)
        best_id = cutlass.Int32(EXPERTS)
        best_p = cutlass.Float32(0.0)
        for i in cutlass.range_constexpr(2):
            if c[i] > best:
                best = c[i]
                best_id = lane + 32 * i
                best_p = p[i]
        for k in cutlass.range_constexpr(5):
            ov = cute.arch.shuffle_sync_bfly(best, offset=16 >> k)
            oi = cute.arch.shuffle_sync_bfly(best_id, offset=16 >> k)
            op = cute.arch.shuffle_sync_bfly(best_p, offset=16 >> k)
            if ov > best or (ov == best and oi < best_id):
                best = ov
                best_id = oi
                best_p = op
        sel_id.append(best_id)
        sel_p.append(best_p)
        for i in cutlass.range_constexpr(2):
            if best_id == lane + 32 * i:
                c[i] = cutlass.Float32(NEG_BIG)
    psum = cutlass.Float32(0.0)
    for r in cutlass.range_constexpr(TOP_K):
        psum = psum + sel_p[r]
    inv = cutlass.Float32(1.0) / cute.arch.fmax(psum, cutlass.Float32(NORM_MIN))
    if tok < tokens and lane == 0:
        for r in cutlass.range_constexpr(TOP_K):
            e = sel_id[r] - offset
            if e >= 0 and e < LOCAL:
                mPE[tok, r] = e
                mPS[tok, r] = cute.arch.atomic_add(mCNT.iterator + e, cutlass.Int32(1))
            else:
                mPE[tok, r] = cutlass.Int32(-1)
                mPS[tok, r] = cutlass.Int32(0)
            mPW[tok, r] = sel_p[r] * inv


@cute.jit
def _route(
    mL: cute.Tensor, mB: cute.Tensor, offset: cutlass.Int32, mPE: cute.Tensor, mPW: cute.Tensor,
    mPS: cute.Tensor, mCNT: cute.Tensor,
):  # fmt: skip
    grid = (cute.size(mL, mode=[0]) + TOKENS_PER_CTA - 1) // TOKENS_PER_CTA
    _route_kernel(mL, mB, offset, mPE, mPW, mPS, mCNT).launch(grid=[grid, 1, 1], block=[THREADS, 1, 1])


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        t = cute.sym_int()
        f32, i32 = cutlass.Float32, cutlass.Int32
        logits = make_fake_compact_tensor(f32, (t, EXPERTS), stride_order=(1, 0), assumed_align=16)
        bias = make_fake_compact_tensor(f32, (EXPERTS,), assumed_align=16)
        pe, ps = (make_fake_compact_tensor(i32, (t, TOP_K), stride_order=(1, 0), assumed_align=4) for _ in range(2))
        pw = make_fake_compact_tensor(f32, (t, TOP_K), stride_order=(1, 0), assumed_align=4)
        cnt = make_fake_compact_tensor(i32, (LOCAL,), assumed_align=4)
        route = cute.compile(_route, logits, bias, i32(0), pe, pw, ps, cnt, options="--enable-tvm-ffi")
        _COMPILED.extend((route, *M.compiled(TOP_K, 2)))
    return _COMPILED


def run(
    hidden_states: torch.Tensor,
    router_logits: torch.Tensor,
    e_score_correction_bias: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    shared_w13: torch.Tensor,
    shared_w2: torch.Tensor,
    local_expert_offset: int,
) -> torch.Tensor:
    route = _compiled()[0]
    tokens = hidden_states.shape[0]
    dev = hidden_states.device
    pair_e = torch.empty((tokens, TOP_K), dtype=torch.int32, device=dev)
    pair_w = torch.empty((tokens, TOP_K), dtype=torch.float32, device=dev)
    pair_s = torch.empty((tokens, TOP_K), dtype=torch.int32, device=dev)
    counts = torch.zeros(LOCAL, dtype=torch.int32, device=dev)
    route(router_logits, e_score_correction_bias, int(local_expert_offset), pair_e, pair_w, pair_s, counts)
    ones = torch.ones(tokens, dtype=torch.float32, device=dev)  # shared rows: weight 1
    return M.run_pipeline(TOP_K, hidden_states, pair_e, pair_w, pair_s, counts, ones, w13, w2, shared_w13, shared_w2)
