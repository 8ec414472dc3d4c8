"""p47 correction_bias_shared_expert_ernie_bf16 — plan `fused`, TIRx: route kernel + grouped-GEMM pipeline.

Plan: (1) route: one warp per token, lane l owns experts l and l + 32 of the 64; float32 softmax
(warp max, exp, warp sum), then 6 rounds of a warp argmax on p + bias (ties to the lower id) pick the
experts; weights = p / max(sum of the 6 p, 1e-12). Lane 0 records each chosen expert that is local
(global id - offset in [0, 32)) with its weight and its rank among the expert's rows (atomicAdd on the
expert's count), -1 otherwise. (2) The grouped-GEMM pipeline of `_moe_tirx.py`: scan -> scatter of
the hidden rows into 128-row expert tiles (the shared MLP of intermediate 3072 is two segments of 1536
over all tokens, weight 1) -> GEMM1 (m64n256 bf16 WGMMAs: 128 gate + 128 up rows per tile, SwiGLU in
the epilogue) -> GEMM2 (m64n256 WGMMAs, row weight in the epilogue) -> combine (float32 sum of the
token's rows, one bf16 rounding). Compiled once per token count.
"""

import torch
import tvm
from tvm.script import tirx as T

from problems.moe.solutions import _moe_tirx as M

EXPERTS = 64
LOCAL = 32
TOP_K = 6
NORM_MIN = 1e-12
THREADS = 256
TOKENS_PER_CTA = THREADS // 32
NEG_BIG = -3.0e38
FULL = 0xFFFFFFFF

_KERNELS: dict[tuple[int, int, int, int], tuple] = {}


def _route(tokens: int):
    grid = (tokens + TOKENS_PER_CTA - 1) // TOKENS_PER_CTA

    @T.prim_func
    def route(
        l_ptr: T.handle,
        b_ptr: T.handle,
        offset: T.int32,
        pe_ptr: T.handle,
        pw_ptr: T.handle,
        ps_ptr: T.handle,
        cnt_ptr: T.handle,
    ):
        L = T.match_buffer(l_ptr, (tokens, EXPERTS), "float32")
        B = T.match_buffer(b_ptr, (EXPERTS,), "float32")
        PE = T.match_buffer(pe_ptr, (tokens, TOP_K), "int32")
        PW = T.match_buffer(pw_ptr, (tokens, TOP_K), "float32")
        PS = T.match_buffer(ps_ptr, (tokens, TOP_K), "int32")
        CNT = T.match_buffer(cnt_ptr, (LOCAL,), "int32")
        T.device_entry()
        bx = T.cta_id([grid])
        tx = T.thread_id([THREADS])
        tok = T.meta_var(bx * TOKENS_PER_CTA + tx // 32)
        lane = T.meta_var(tx % 32)
        pv = T.alloc_local((2,), "float32")
        cv = T.alloc_local((2,), "float32")
        sel_id = T.alloc_local((TOP_K,), "int32")
        sel_p = T.alloc_local((TOP_K,), "float32")
        for i in T.unroll(2):
            pv[i] = T.Select(tok < tokens, L[T.min(tok, tokens - 1), i * 32 + lane], T.float32(0))
        mx: T.f32 = T.cuda.warp_max(T.max(pv[0], pv[1]))
        for i in T.unroll(2):
            pv[i] = T.exp(pv[i] - mx)
        total: T.f32 = T.cuda.warp_sum(pv[0] + pv[1])
        for i in T.unroll(2):
            pv[i] = pv[i] / total
            cv[i] = pv[i] + B[i * 32 + lane]
        for r in T.unroll(TOP_K):
            best: T.f32 = T.float32(NEG_BIG)
            best_id: T.int32 = EXPERTS
            best_p: T.f32 = T.float32(0)
            for i in T.unroll(2):
                if cv[i] > best:
                    best = cv[i]
                    best_id = i * 32 + lane
                    best_p = pv[i]
            for k in T.unroll(5):
                ov: T.f32 = T.cuda.__shfl_xor_sync(FULL, best, 16 >> k, 32)
                oi: T.int32 = T.cuda.__shfl_xor_sync(FULL, best_id, 16 >> k, 32)
                op: T.f32 = T.cuda.__shfl_xor_sync(FULL, best_p, 16 >> k, 32)
                if ov > best or (ov == best and oi < best_id):
                    best = ov
                    best_id = oi
                    best_p = op
            sel_id[r] = best_id
            sel_p[r] = best_p
            for i in T.unroll(2):
                if best_id == i * 32 + lane:
                    cv[i] = T.float32(NEG_BIG)
        psum: T.f32 = T.float32(0)
        for r in T.unroll(TOP_K):
            psum = psum + sel_p[r]
        inv: T.f32 = T.float32(1) / T.max(psum, T.float32(NORM_MIN))
        if tok < tokens and lane == 0:
            for r in T.unroll(TOP_K):
                e: T.int32 = sel_id[r] - offset
                if e >= 0 and e < LOCAL:
                    PE[tok, r] = e
                    PS[tok, r] = T.cuda.atomic_add(CNT.ptr_to([e]), 1)
                else:
                    PE[tok, r] = -1
                    PS[tok, r] = 0
                PW[tok, r] = sel_p[r] * inv

    return route


def _shape_key(
    hidden_states: torch.Tensor, router_logits: torch.Tensor, bias: torch.Tensor, w13: torch.Tensor,
    w2: torch.Tensor, shared_w13: torch.Tensor, *_: object,
) -> tuple[int, int, int, int]:  # fmt: skip
    """(tokens, hidden, intermediate, shared segments): the shared MLP is shared_inter / inter segments."""
    return hidden_states.shape[0], hidden_states.shape[1], w2.shape[2], shared_w13.shape[0] // w13.shape[1]


def _shape(tokens: int, hidden: int, inter: int, segments: int) -> M.MoeShape:
    return M.MoeShape(tokens, hidden, inter, LOCAL, TOP_K, segments)


def _build(tokens: int, hidden: int, inter: int, segments: int) -> tuple:
    route = tvm.compile(tvm.IRModule({"main": _route(tokens)}), target=M.TARGET, tir_pipeline="tirx")
    return (route, *M.build(_shape(tokens, hidden, inter, segments)))


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
    key = _shape_key(hidden_states, router_logits, e_score_correction_bias, w13, w2, shared_w13)
    kernels = _KERNELS.get(key)
    if kernels is None:
        kernels = _KERNELS[key] = _build(*key)
    tokens = key[0]
    dev = hidden_states.device
    pair_e = torch.empty((tokens, TOP_K), dtype=torch.int32, device=dev)
    pair_w = torch.empty((tokens, TOP_K), dtype=torch.float32, device=dev)
    pair_s = torch.empty((tokens, TOP_K), dtype=torch.int32, device=dev)
    counts = torch.zeros(LOCAL, dtype=torch.int32, device=dev)
    kernels[0](router_logits, e_score_correction_bias, int(local_expert_offset), pair_e, pair_w, pair_s, counts)
    ones = torch.ones(tokens, dtype=torch.float32, device=dev)  # shared rows: weight 1
    return M.run_pipeline(
        kernels[1:], _shape(*key), hidden_states, pair_e, pair_w, pair_s, counts, ones, w13, w2, shared_w13, shared_w2
    )
