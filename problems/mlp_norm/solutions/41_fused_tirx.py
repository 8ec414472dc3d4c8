"""p41 qkv_per_head_rmsnorm_gemma3n_e4b_audio — plan `fused`, TIRx: one launch normalises q, k and v.

Plan: the three tensors are viewed as [rows, 192] float32 (rows = batch·seq·8 heads). A half-warp owns
one head row of 192 floats = 48 16-byte vectors: lane l (0..15) loads vectors l, l+16 and l+32, so each
of the three loads is one fully coalesced 256-byte half-warp access, and stores its 12 outputs the same
way. The float32 sum of squares is reduced over the 16 lanes with butterfly shuffles (no shared memory,
no barrier). TVM builds CUDA with --use_fast_math, so the per-row scale uses the correctly rounded
intrinsics __fdiv_rn / __frsqrt_rn (float32 output: the error budget is a few ulp); then
y = (x · inv) · w for q and k, x · inv for v. A CTA of 256 threads covers 16 rows; the grid is
3 × ceil(rows/16) CTAs, CTA b normalising tensor b // ceil(rows/16) (a CTA-uniform branch; one macro
instantiated three times), so the single launch streams all six tensors once (weights from L1/L2).
Compiled once per row count and cached.
"""

import torch
import tvm
from tvm.script import tirx as T

HEAD_DIM = 192
VEC = 4  # float32 per 16-byte access
LANES = 16  # threads per head row
NV = HEAD_DIM // (VEC * LANES)  # 3 vectors per thread
THREADS = 256
ROWS_PER_CTA = THREADS // LANES
EPS = 1e-6

_KERNELS: dict[tuple[int], tvm.runtime.Module] = {}


def _build(rows: int) -> tvm.runtime.Module:
    ctas = (rows + ROWS_PER_CTA - 1) // ROWS_PER_CTA

    @T.macro
    def norm_rows(X: T.Buffer, W: T.Buffer, Y: T.Buffer, row: T.int32, lane: T.int32, xv: T.Buffer, yv: T.Buffer):
        # xv/yv: 12 floats, element j·4 + i = column (lane + 16·j)·4 + i of the row
        if row < rows:
            for j in T.unroll(NV):
                for i in T.vectorized(VEC):
                    xv[j * VEC + i] = X[row, (lane + LANES * j) * VEC + i]
        else:
            for j in T.unroll(NV * VEC):
                xv[j] = T.float32(0)
        acc: T.f32 = T.float32(0)
        for j in T.unroll(NV * VEC):
            acc = acc + xv[j] * xv[j]
        # all 32 lanes take part in the shuffles (the guard above only zeroes the data)
        acc = T.cuda.warp_sum(acc, width=LANES)
        ms: T.f32 = T.call_pure_extern("float32", "__fdiv_rn", acc, T.float32(HEAD_DIM))
        inv: T.f32 = T.call_pure_extern("float32", "__frsqrt_rn", ms + T.float32(EPS))
        if row < rows:
            for j in T.unroll(NV):
                for i in T.vectorized(VEC):
                    yv[j * VEC + i] = xv[j * VEC + i] * inv * W[(lane + LANES * j) * VEC + i]
                for i in T.vectorized(VEC):
                    Y[row, (lane + LANES * j) * VEC + i] = yv[j * VEC + i]

    @T.macro
    def norm_rows_noscale(X: T.Buffer, Y: T.Buffer, row: T.int32, lane: T.int32, xv: T.Buffer, yv: T.Buffer):
        if row < rows:
            for j in T.unroll(NV):
                for i in T.vectorized(VEC):
                    xv[j * VEC + i] = X[row, (lane + LANES * j) * VEC + i]
        else:
            for j in T.unroll(NV * VEC):
                xv[j] = T.float32(0)
        acc: T.f32 = T.float32(0)
        for j in T.unroll(NV * VEC):
            acc = acc + xv[j] * xv[j]
        acc = T.cuda.warp_sum(acc, width=LANES)
        ms: T.f32 = T.call_pure_extern("float32", "__fdiv_rn", acc, T.float32(HEAD_DIM))
        inv: T.f32 = T.call_pure_extern("float32", "__frsqrt_rn", ms + T.float32(EPS))
        if row < rows:
            for j in T.unroll(NV):
                for i in T.vectorized(VEC):
                    yv[j * VEC + i] = xv[j * VEC + i] * inv
                for i in T.vectorized(VEC):
                    Y[row, (lane + LANES * j) * VEC + i] = yv[j * VEC + i]

    @T.prim_func
    def qkv_norm(
        q_ptr: T.handle,
        k_ptr: T.handle,
        v_ptr: T.handle,
        wq_ptr: T.handle,
        wk_ptr: T.handle,
        qo_ptr: T.handle,
        ko_ptr: T.handle,
        vo_ptr: T.handle,
    ):
        Q = T.match_buffer(q_ptr, (rows, HEAD_DIM), "float32")
        K = T.match_buffer(k_ptr, (rows, HEAD_DIM), "float32")
        V = T.match_buffer(v_ptr, (rows, HEAD_DIM), "float32")
        Wq = T.match_buffer(wq_ptr, (HEAD_DIM,), "float32")
        Wk = T.match_buffer(wk_ptr, (HEAD_DIM,), "float32")
        Qo = T.match_buffer(qo_ptr, (rows, HEAD_DIM), "float32")
        Ko = T.match_buffer(ko_ptr, (rows, HEAD_DIM), "float32")
        Vo = T.match_buffer(vo_ptr, (rows, HEAD_DIM), "float32")
        T.device_entry()
        bx = T.cta_id([3 * ctas])
        tx = T.thread_id([THREADS])
        which = T.meta_var(bx // ctas)
        row = T.meta_var((bx % ctas) * ROWS_PER_CTA + tx // LANES)
        lane = T.meta_var(tx % LANES)
        xv = T.alloc_local((NV * VEC,), "float32")
        yv = T.alloc_local((NV * VEC,), "float32")
        # CTA-uniform branch: whole warps take the same tensor
        if which == 0:
            norm_rows(Q, Wq, Qo, row, lane, xv, yv)
        elif which == 1:
            norm_rows(K, Wk, Ko, row, lane, xv, yv)
        else:
            norm_rows_noscale(V, Vo, row, lane, xv, yv)

    mod = tvm.IRModule({"main": qkv_norm})
    return tvm.compile(mod, target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")


def _shape_key(query: torch.Tensor, *_: object) -> tuple[int]:
    return (query.numel() // HEAD_DIM,)


def run(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    key_ = _shape_key(query)
    kernel = _KERNELS.get(key_)
    if kernel is None:
        kernel = _KERNELS[key_] = _build(*key_)
    q = query.contiguous()
    k = key.contiguous()
    v = value.contiguous()
    q_out = torch.empty_like(q)
    k_out = torch.empty_like(k)
    v_out = torch.empty_like(v)
    kernel(
        q.view(-1, HEAD_DIM),
        k.view(-1, HEAD_DIM),
        v.view(-1, HEAD_DIM),
        q_weight.contiguous(),
        k_weight.contiguous(),
        q_out.view(-1, HEAD_DIM),
        k_out.view(-1, HEAD_DIM),
        v_out.view(-1, HEAD_DIM),
    )
    return q_out, k_out, v_out
