"""p49 group_limited_topk_routing_ringflash_bf16 — plan `gemmeager_routingkernel`, TIRx (partial).

Plan (partial): the gate GEMM stays eager — `router_logits = x.float() @ W.float().T`, the reference's
own float32 expression, so the logits (an output) are the reference's bits — and so does the sigmoid
(TIRx compiles CUDA with fast math, whose approximate exp would move every weight by a few ulp). The
TIRx kernel does the routing: one warp per token, 8 tokens per 256-thread CTA. Lane l owns experts
8l .. 8l+7 (two 16-byte loads of the scores and of the bias), so group g (32 experts) is lanes
4g .. 4g+3. c = s + bias; each lane keeps its two largest c, the top-2 pairs are merged over the 4 lanes
of a group with xor shuffles, and the group score is their sum. A group is kept when fewer than 4
groups beat it (scores read with 8 broadcasts from each group's first lane; ties go to the lower
group, as no draw has any). Then 8 rounds of a warp argmax (value, expert id, unbiased score carried
through the butterfly; ties to the lower id) pick the experts in decreasing c; the winner's owner
masks it out. Lane 0 writes the 8 ids and the weights s / (Σs + 1e-20) · 2.5, the division refined by
one Newton step so the fast-math reciprocal costs no accuracy. Compiled once per token count.
"""

import torch
import tvm
from tvm.script import tirx as T

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
FULL = 0xFFFFFFFF

_KERNELS: dict[tuple[int], tvm.runtime.Module] = {}


def _build(tokens: int) -> tvm.runtime.Module:
    grid = (tokens + TOKENS_PER_CTA - 1) // TOKENS_PER_CTA

    @T.prim_func
    def route(s_ptr: T.handle, b_ptr: T.handle, w_ptr: T.handle, id_ptr: T.handle):
        S = T.match_buffer(s_ptr, (tokens, EXPERTS), "float32")
        B = T.match_buffer(b_ptr, (EXPERTS,), "float32")
        W = T.match_buffer(w_ptr, (tokens, TOP_K), "float32")
        IDS = T.match_buffer(id_ptr, (tokens, TOP_K), "int32")
        T.device_entry()
        bx = T.cta_id([grid])
        tx = T.thread_id([THREADS])
        tok = T.meta_var(bx * TOKENS_PER_CTA + tx // 32)
        lane = T.meta_var(tx % 32)
        sv = T.alloc_local((PER_LANE,), "float32")
        bv = T.alloc_local((PER_LANE,), "float32")
        cv = T.alloc_local((PER_LANE,), "float32")
        sel_w = T.alloc_local((TOP_K,), "float32")
        sel_id = T.alloc_local((TOP_K,), "int32")
        if tok < tokens:
            for j in T.unroll(2):
                for i in T.vectorized(4):
                    sv[j * 4 + i] = S[tok, lane * PER_LANE + j * 4 + i]
        else:
            for i in T.unroll(PER_LANE):
                sv[i] = T.float32(0)
        for j in T.unroll(2):
            for i in T.vectorized(4):
                bv[j * 4 + i] = B[lane * PER_LANE + j * 4 + i]
        a1: T.f32 = T.float32(NEG_BIG)
        a2: T.f32 = T.float32(NEG_BIG)
        for i in T.unroll(PER_LANE):
            cv[i] = sv[i] + bv[i]
            a2 = T.max(a2, T.min(a1, cv[i]))
            a1 = T.max(a1, cv[i])
        # merge the (largest, second largest) pairs of the 4 lanes of a group
        for k in T.unroll(2):
            o1: T.f32 = T.cuda.__shfl_xor_sync(FULL, a1, 1 << k, 32)
            o2: T.f32 = T.cuda.__shfl_xor_sync(FULL, a2, 1 << k, 32)
            a2 = T.max(T.min(a1, o1), T.max(a2, o2))
            a1 = T.max(a1, o1)
        gscore: T.f32 = a1 + a2
        mine = T.meta_var(lane // LANES_PER_GROUP)
        beaten: T.int32 = 0
        for g in T.unroll(N_GROUP):
            other: T.f32 = T.cuda.__shfl_sync(FULL, gscore, g * LANES_PER_GROUP, 32)
            if other > gscore or (other == gscore and g < mine):
                beaten = beaten + 1
        if beaten >= TOPK_GROUP:
            for i in T.unroll(PER_LANE):
                cv[i] = T.float32(NEG_BIG)
        for r in T.unroll(TOP_K):
            best: T.f32 = T.float32(NEG_BIG)
            best_id: T.int32 = EXPERTS
            best_s: T.f32 = T.float32(0)
            for i in T.unroll(PER_LANE):
                if cv[i] > best:
                    best = cv[i]
                    best_id = lane * PER_LANE + i
                    best_s = sv[i]
            for k in T.unroll(5):
                ov: T.f32 = T.cuda.__shfl_xor_sync(FULL, best, 16 >> k, 32)
                oi: T.int32 = T.cuda.__shfl_xor_sync(FULL, best_id, 16 >> k, 32)
                os: T.f32 = T.cuda.__shfl_xor_sync(FULL, best_s, 16 >> k, 32)
                if ov > best or (ov == best and oi < best_id):
                    best = ov
                    best_id = oi
                    best_s = os
            sel_id[r] = best_id
            sel_w[r] = best_s
            # the owner removes the winner from its candidates
            for i in T.unroll(PER_LANE):
                if best_id == lane * PER_LANE + i:
                    cv[i] = T.float32(NEG_BIG)
        total: T.f32 = T.float32(0)
        for r in T.unroll(TOP_K):
            total = total + sel_w[r]
        denom: T.f32 = total + T.float32(1e-20)
        inv: T.f32 = T.float32(1) / denom
        if tok < tokens and lane == 0:
            for r in T.unroll(TOP_K):
                q0: T.f32 = sel_w[r] * inv
                # one Newton step: the residual is exact (fused), so q is the correctly rounded quotient
                q: T.f32 = q0 + (sel_w[r] - q0 * denom) * inv
                W[tok, r] = q * T.float32(ROUTED_SCALING)
                IDS[tok, r] = sel_id[r]

    mod = tvm.IRModule({"main": route})
    return tvm.compile(mod, target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")


def _shape_key(hidden_states: torch.Tensor, *_: object) -> tuple[int]:
    return (hidden_states.shape[0],)


def run(
    hidden_states: torch.Tensor, gate_weight: torch.Tensor, expert_bias: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    key = _shape_key(hidden_states)
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = _KERNELS[key] = _build(*key)
    tokens = key[0]
    # eager: the reference's float32 gate GEMM and sigmoid (logits are an output)
    logits = hidden_states.float() @ gate_weight.float().t()
    scores = torch.sigmoid(logits)
    weights = torch.empty((tokens, TOP_K), dtype=torch.float32, device=hidden_states.device)
    ids = torch.empty((tokens, TOP_K), dtype=torch.int32, device=hidden_states.device)
    kernel(scores, expert_bias.float().contiguous(), weights, ids)
    return weights, ids, logits
