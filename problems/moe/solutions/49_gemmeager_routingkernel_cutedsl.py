"""p49 group_limited_topk_routing_ringflash_bf16 — plan `gemmeager_routingkernel`, CuTe DSL (partial).

Plan (partial): the gate GEMM and the sigmoid stay eager — `router_logits = x.float() @ W.float().T`
and `torch.sigmoid`, the reference's own float32 expressions, so the logits (an output) and the scores
are the reference's bits. The CuTe DSL kernel does the routing: one warp per token, 8 tokens per
256-thread CTA. Lane l owns experts 8l .. 8l+7 (two 16-byte loads of the scores and of the bias), so
group g (32 experts) is lanes 4g .. 4g+3. c = s + bias; each lane keeps its two largest c, the top-2
pairs are merged over the 4 lanes of a group with xor shuffles, and the group score is their sum. A
group is kept when fewer than 4 groups beat it strictly (scores read with 8 broadcasts from each
group's first lane; the inputs are drawn with a margin at the 4th/5th group boundary, so a tie never
decides). Then 8 rounds of a warp argmax (value, expert id, unbiased score carried through the
butterfly) pick the experts in decreasing c (the top 9 are drawn tie-free, so every lane converges on
the same winner); the winner's owner masks it out. Lane 0 writes the 8 ids and the weights
s / (Σs + 1e-20) · 2.5 with IEEE division. Token count symbolic: one compilation, cached.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor

EXPERTS = 256
N_GROUP = 8
TOPK_GROUP = 4
TOP_K = 8
PER_LANE = EXPERTS // 32
LANES_PER_GROUP = 32 // N_GROUP
THREADS = 256
TOKENS_PER_CTA = THREADS // 32
ROUTED_SCALING = 2.5
NEG_BIG = -3.0e38  # below every selection score (sigmoid + bias lies in (-1, 2))


@cute.kernel
def _route_kernel(mS: cute.Tensor, mB: cute.Tensor, mW: cute.Tensor, mIds: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    tokens = cute.size(mS, mode=[0])
    tok = bidx * TOKENS_PER_CTA + tidx // 32
    lane = tidx % 32
    # ((1, PER_LANE), (rows, 32)) views: 8 contiguous floats (two 16-byte vectors) per lane
    gS = cute.zipped_divide(mS, (1, PER_LANE))
    gB = cute.zipped_divide(mB, (1, PER_LANE))
    rS = cute.make_rmem_tensor((PER_LANE,), cutlass.Float32)
    rB = cute.make_rmem_tensor((PER_LANE,), cutlass.Float32)
    rC = cute.make_rmem_tensor((PER_LANE,), cutlass.Float32)
    rS.fill(0.0)
    if tok < tokens:
        cute.autovec_copy(gS[(0, None), (tok, lane)], rS)
    cute.autovec_copy(gB[(0, None), (0, lane)], rB)
    rC.store(rS.load() + rB.load())
    a1 = cutlass.Float32(NEG_BIG)
    a2 = cutlass.Float32(NEG_BIG)
    for i in cutlass.range_constexpr(PER_LANE):
        a2 = cute.arch.fmax(a2, cute.arch.fmin(a1, rC[i]))
        a1 = cute.arch.fmax(a1, rC[i])
    # merge the (largest, second largest) pairs of the 4 lanes of a group
    for k in cutlass.range_constexpr(2):
        o1 = cute.arch.shuffle_sync_bfly(a1, offset=1 << k)
        o2 = cute.arch.shuffle_sync_bfly(a2, offset=1 << k)
        a2 = cute.arch.fmax(cute.arch.fmin(a1, o1), cute.arch.fmax(a2, o2))
        a1 = cute.arch.fmax(a1, o1)
    gscore = a1 + a2
    beaten = cutlass.Int32(0)
    for g in cutlass.range_constexpr(N_GROUP):
        other = cute.arch.shuffle_sync(gscore, offset=g * LANES_PER_GROUP)
        if other > gscore:
            beaten = beaten + 1
    if beaten >= TOPK_GROUP:
        rC.fill(NEG_BIG)
    rW = cute.make_rmem_tensor((TOP_K,), cutlass.Float32)
    rIds = cute.make_rmem_tensor((TOP_K,), cutlass.Int32)
    for r in cutlass.range_constexpr(TOP_K):
        best = cutlass.Float32(NEG_BIG)
        best_id = cutlass.Int32(EXPERTS)
        best_s = cutlass.Float32(0.0)
        for i in cutlass.range_constexpr(PER_LANE):
            if rC[i] > best:
                best = rC[i]
                best_id = lane * PER_LANE + i
                best_s = rS[i]
        for k in cutlass.range_constexpr(5):
            ov = cute.arch.shuffle_sync_bfly(best, offset=16 >> k)
            oi = cute.arch.shuffle_sync_bfly(best_id, offset=16 >> k)
            os = cute.arch.shuffle_sync_bfly(best_s, offset=16 >> k)
            if ov > best:
                best = ov
                best_id = oi
                best_s = os
        rIds[r] = best_id
        rW[r] = best_s
        # the owner removes the winner from its candidates
        for i in cutlass.range_constexpr(PER_LANE):
            if best_id == lane * PER_LANE + i:
                rC[i] = cutlass.Float32(NEG_BIG)
    total = cutlass.Float32(0.0)
    for r in cutlass.range_constexpr(TOP_K):
        total = total + rW[r]
    denom = total + cutlass.Float32(1e-20)
    if tok < tokens and lane == 0:
        for r in cutlass.range_constexpr(TOP_K):
            mW[tok, r] = rW[r] / denom * cutlass.Float32(ROUTED_SCALING)
            mIds[tok, r] = rIds[r]


@cute.jit
def _route(mS: cute.Tensor, mB: cute.Tensor, mW: cute.Tensor, mIds: cute.Tensor):
    tokens = cute.size(mS, mode=[0])
    _route_kernel(mS, mB, mW, mIds).launch(
        grid=[(tokens + TOKENS_PER_CTA - 1) // TOKENS_PER_CTA, 1, 1], block=[THREADS, 1, 1]
    )


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        tokens = cute.sym_int()
        scores = make_fake_compact_tensor(cutlass.Float32, (tokens, EXPERTS), stride_order=(1, 0), assumed_align=16)
        bias = make_fake_compact_tensor(cutlass.Float32, (1, EXPERTS), stride_order=(1, 0), assumed_align=16)
        weights = make_fake_compact_tensor(cutlass.Float32, (tokens, TOP_K), stride_order=(1, 0), assumed_align=16)
        ids = make_fake_compact_tensor(cutlass.Int32, (tokens, TOP_K), stride_order=(1, 0), assumed_align=16)
        _COMPILED.append(cute.compile(_route, scores, bias, weights, ids, options="--enable-tvm-ffi"))
    return _COMPILED[0]


def run(
    hidden_states: torch.Tensor, gate_weight: torch.Tensor, expert_bias: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    kernel = _compiled()
    tokens = hidden_states.shape[0]
    # eager: the reference's float32 gate GEMM and sigmoid (logits are an output)
    logits = hidden_states.float() @ gate_weight.float().t()
    scores = torch.sigmoid(logits)
    weights = torch.empty((tokens, TOP_K), dtype=torch.float32, device=hidden_states.device)
    ids = torch.empty((tokens, TOP_K), dtype=torch.int32, device=hidden_states.device)
    kernel(scores, expert_bias.float().contiguous().view(1, EXPERTS), weights, ids)
    return weights, ids, logits
