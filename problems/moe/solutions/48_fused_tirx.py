"""p48 top10_shared_gate_qwen3next_bf16 — plan `fused`, TIRx: route kernel + grouped-GEMM pipeline.

Plan: (1) route: one warp per token, lane l owns experts 32 i + l (i < 16, coalesced bf16 loads); 10
rounds of a warp argmax on the logits (the softmax is monotone; ties to the lower id) pick the experts,
and their weights are exp(l - l_max) / sum over the 10 of exp(l_j - l_max) (the softmax denominator
cancels in p / sum p). Lane 0 records each chosen expert that is local with its weight and its rank
among the expert's rows (atomicAdd on the expert's count), -1 otherwise. The same warp forms the shared
gate sigmoid(w_gate . x) (8 bf16 x 8 loads per lane, butterfly sum). (2) The grouped-GEMM pipeline of
`_moe_tirx.py`: scan -> scatter of the hidden rows into 128-row expert tiles (the shared expert is one
more segment over all tokens, its rows weighted by the shared gate) -> GEMM1 (m64n256 bf16 WGMMAs: 128
gate + 128 up rows per tile, SwiGLU in the epilogue) -> GEMM2 (m64n256 WGMMAs, row weight in the
epilogue) -> combine (float32 sum of the token's rows, one bf16 rounding). Compiled once per shape.
"""

import torch
import tvm
from tvm.script import tirx as T

from problems.moe.solutions import _moe_tirx as M

EXPERTS = 512
LOCAL = 64
TOP_K = 10
PER_LANE = EXPERTS // 32
THREADS = 256
TOKENS_PER_CTA = THREADS // 32
VEC = 8
NEG_BIG = -3.0e38
FULL = 0xFFFFFFFF

_KERNELS: dict[tuple[int, int, int, int], tuple] = {}


def _route(tokens: int, hidden: int):
    grid = (tokens + TOKENS_PER_CTA - 1) // TOKENS_PER_CTA
    xv_per_lane = hidden // 32 // VEC  # 16-byte vectors of x per lane

    @T.prim_func
    def route(
        l_ptr: T.handle,
        x_ptr: T.handle,
        g_ptr: T.handle,
        offset: T.int32,
        pe_ptr: T.handle,
        pw_ptr: T.handle,
        ps_ptr: T.handle,
        cnt_ptr: T.handle,
        sg_ptr: T.handle,
    ):
        L = T.match_buffer(l_ptr, (tokens, EXPERTS), "bfloat16")
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        G = T.match_buffer(g_ptr, (hidden,), "bfloat16")
        PE = T.match_buffer(pe_ptr, (tokens, TOP_K), "int32")
        PW = T.match_buffer(pw_ptr, (tokens, TOP_K), "float32")
        PS = T.match_buffer(ps_ptr, (tokens, TOP_K), "int32")
        CNT = T.match_buffer(cnt_ptr, (LOCAL,), "int32")
        SG = T.match_buffer(sg_ptr, (tokens,), "float32")
        T.device_entry()
        bx = T.cta_id([grid])
        tx = T.thread_id([THREADS])
        tok = T.meta_var(bx * TOKENS_PER_CTA + tx // 32)
        row = T.meta_var(T.min(tok, tokens - 1))
        lane = T.meta_var(tx % 32)
        lv = T.alloc_local((PER_LANE,), "float32")
        xv = T.alloc_local((VEC,), "bfloat16")
        gv = T.alloc_local((VEC,), "bfloat16")
        sel_id = T.alloc_local((TOP_K,), "int32")
        sel_v = T.alloc_local((TOP_K,), "float32")
        ev = T.alloc_local((TOP_K,), "float32")
        for i in T.unroll(PER_LANE):
            lv[i] = T.Cast("float32", L[row, i * 32 + lane])
        dot: T.f32 = T.float32(0)
        for c in T.unroll(xv_per_lane):
            for v in T.vectorized(VEC):
                xv[v] = X[row, (c * 32 + lane) * VEC + v]
            for v in T.vectorized(VEC):
                gv[v] = G[(c * 32 + lane) * VEC + v]
            for v in T.unroll(VEC):
                dot = dot + T.Cast("float32", xv[v]) * T.Cast("float32", gv[v])
        dot = T.cuda.warp_sum(dot)
        for r in T.unroll(TOP_K):
            best: T.f32 = T.float32(NEG_BIG)
            best_id: T.int32 = EXPERTS
            # ids grow with i, so the strict test keeps the lower id of equal logits
            for i in T.unroll(PER_LANE):
                if lv[i] > best:
                    best = lv[i]
                    best_id = i * 32 + lane
            for k in T.unroll(5):
                ov: T.f32 = T.cuda.__shfl_xor_sync(FULL, best, 16 >> k, 32)
                oi: T.int32 = T.cuda.__shfl_xor_sync(FULL, best_id, 16 >> k, 32)
                if ov > best or (ov == best and oi < best_id):
                    best = ov
                    best_id = oi
            sel_v[r] = best
            sel_id[r] = best_id
            for i in T.unroll(PER_LANE):
                if best_id == i * 32 + lane:
                    lv[i] = T.float32(NEG_BIG)
        total: T.f32 = T.float32(0)
        for r in T.unroll(TOP_K):
            ev[r] = T.exp(sel_v[r] - sel_v[0])
            total = total + ev[r]
        inv: T.f32 = T.float32(1) / total
        if tok < tokens and lane == 0:
            SG[tok] = T.float32(1) / (T.float32(1) + T.exp(T.float32(0) - dot))
            for r in T.unroll(TOP_K):
                e: T.int32 = sel_id[r] - offset
                if e >= 0 and e < LOCAL:
                    PE[tok, r] = e
                    PS[tok, r] = T.cuda.atomic_add(CNT.ptr_to([e]), 1)
                else:
                    PE[tok, r] = -1
                    PS[tok, r] = 0
                PW[tok, r] = ev[r] * inv

    return route


def _shape_key(
    hidden_states: torch.Tensor, router_logits: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor,
    shared_w13: torch.Tensor, *_: object,
) -> tuple[int, int, int, int]:  # fmt: skip
    """(tokens, hidden, intermediate, shared segments)."""
    return hidden_states.shape[0], hidden_states.shape[1], w2.shape[2], shared_w13.shape[0] // w13.shape[1]


def _shape(tokens: int, hidden: int, inter: int, segments: int) -> M.MoeShape:
    return M.MoeShape(tokens, hidden, inter, LOCAL, TOP_K, segments)


def _build(tokens: int, hidden: int, inter: int, segments: int) -> tuple:
    route = tvm.compile(tvm.IRModule({"main": _route(tokens, hidden)}), target=M.TARGET, tir_pipeline="tirx")
    return (route, *M.build(_shape(tokens, hidden, inter, segments)))


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
    key = _shape_key(hidden_states, router_logits, w13, w2, shared_w13)
    kernels = _KERNELS.get(key)
    if kernels is None:
        kernels = _KERNELS[key] = _build(*key)
    tokens = key[0]
    dev = hidden_states.device
    pair_e = torch.empty((tokens, TOP_K), dtype=torch.int32, device=dev)
    pair_w = torch.empty((tokens, TOP_K), dtype=torch.float32, device=dev)
    pair_s = torch.empty((tokens, TOP_K), dtype=torch.int32, device=dev)
    counts = torch.zeros(LOCAL, dtype=torch.int32, device=dev)
    shared_gate = torch.empty(tokens, dtype=torch.float32, device=dev)
    kernels[0](
        router_logits, hidden_states, shared_gate_weight.view(-1), int(local_expert_offset),
        pair_e, pair_w, pair_s, counts, shared_gate,
    )  # fmt: skip
    return M.run_pipeline(
        kernels[1:], _shape(*key), hidden_states, pair_e, pair_w, pair_s, counts, shared_gate,
        w13, w2, shared_w13, shared_w2,
    )  # fmt: skip
