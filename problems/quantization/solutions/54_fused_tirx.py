"""p54 qkv_projection_qk_norm_qwen3vl_fp8 — plan `fused`, TIRx: activation-quant kernel + FP8 WGMMA GEMM with the
q/k RMSNorm in its epilogue.

Plan: (1) `act_quant` (problems/_wgmma_tirx.py) quantises the bf16 activation per (token, 128-channel
group) to fp8 codes + block-major scales. (2) The block-FP8 GEMM of `block_fp8_mainloop`: 128 x 128
CTA tiles (two warpgroups of m64n128k32 WGMMAs, cp.async into a 6-deep 128B-swizzled ring, per-k-tile
promotion with s_act * s_w, raster of 8 m-tiles across the 48 column tiles). A column tile is exactly
one head (q heads 0-31, k heads 32-39, v heads 40-47), so the epilogue finishes the op: for q and k
tiles each thread sums the squares of its 32 float32 values of row r (and r + 8), the 4 lanes of a
quad that share those rows add theirs with two xor shuffles, and the row is scaled by
rsqrt(mean + 1e-6) and the norm weight before the single bf16 rounding; v tiles are stored as they
are. Each tile writes straight into q, k or v. Compiled once per (tokens, hidden).
"""

import torch
import tvm
from tvm.script import tirx as T

from problems import _wgmma_tirx as W

BN = W.FP8_BN
NREG = BN // 2
HQ, HKV, D = 32, 8, 128
EPS = 1e-6
FULL = 0xFFFFFFFF
TARGET = {"kind": "cuda", "arch": "sm_90a"}

_KERNELS: dict[tuple[int, int], tuple[tvm.runtime.Module, tvm.runtime.Module]] = {}


@T.macro
def _store_head(OUT, head, acc, ssq, NW, tx, m0, tokens, normed):
    """Rows of this thread's accumulator (halves i = 0, 1) into OUT[:, head, :], RMS-normalised when `normed`."""
    for i in T.unroll(2):
        row = T.meta_var(m0 + W.frag_row(tx, i))
        inv: T.f32 = T.float32(1)
        if normed:
            inv = T.rsqrt(ssq[i] / T.float32(D) + T.float32(EPS))
        if row < tokens:
            for j in T.unroll(BN // 8):
                for c in T.vectorized(2):
                    col = T.meta_var(W.frag_col(tx, j, c))
                    if normed:
                        OUT[row, head, col] = T.Cast(
                            "bfloat16", acc[4 * j + 2 * i + c] * inv * T.Cast("float32", NW[col])
                        )
                    else:
                        OUT[row, head, col] = T.Cast("bfloat16", acc[4 * j + 2 * i + c])


def _gemm(tokens: int, k: int):
    k_tiles = k // W.GROUP
    m_tiles = (tokens + W.BM - 1) // W.BM
    n_tiles = HQ + 2 * HKV
    n = n_tiles * D

    @T.prim_func
    def qkv_gemm(
        a_ptr: T.handle,
        b_ptr: T.handle,
        sa_ptr: T.handle,
        sb_ptr: T.handle,
        qw_ptr: T.handle,
        kw_ptr: T.handle,
        q_ptr: T.handle,
        k_ptr: T.handle,
        v_ptr: T.handle,
    ):
        A = T.match_buffer(a_ptr, (tokens, k), "float8_e4m3fn")
        B = T.match_buffer(b_ptr, (n, k), "float8_e4m3fn")
        SA = T.match_buffer(sa_ptr, (k_tiles, tokens), "float32")
        SB = T.match_buffer(sb_ptr, (n_tiles, k_tiles), "float32")
        QW = T.match_buffer(qw_ptr, (D,), "bfloat16")
        KW = T.match_buffer(kw_ptr, (D,), "bfloat16")
        Q = T.match_buffer(q_ptr, (tokens, HQ, D), "bfloat16")
        K = T.match_buffer(k_ptr, (tokens, HKV, D), "bfloat16")
        V = T.match_buffer(v_ptr, (tokens, HKV, D), "bfloat16")
        T.device_entry()
        bx = T.cta_id([m_tiles * n_tiles])
        tx = T.thread_id([W.THREADS])
        pool = T.alloc_buffer((W.smem_bytes(BN),), "uint8", scope="shared.dyn", align=1024)
        acc = T.alloc_local((NREG,), "float32")
        tmp = T.alloc_local((NREG,), "float32")
        ssq = T.alloc_local((2,), "float32")
        mt, nt = T.meta_var(W.raster(bx, m_tiles, n_tiles))
        m0 = T.meta_var(mt * W.BM)
        W.block_fp8_mainloop(pool, acc, tmp, tx, A, B, SA, SB, tokens, n, m0, nt, k_tiles)
        # sum of squares of rows r and r + 8 over the tile's 128 columns: 32 values here, the rest in the quad
        for i in T.unroll(2):
            ssq[i] = T.float32(0)
            for j in T.unroll(BN // 8):
                for c in T.unroll(2):
                    ssq[i] = ssq[i] + acc[4 * j + 2 * i + c] * acc[4 * j + 2 * i + c]
            for sh in T.unroll(2):
                ssq[i] = ssq[i] + T.cuda.__shfl_xor_sync(FULL, ssq[i], 1 << sh, 32)
        if nt < HQ:
            _store_head(Q, nt, acc, ssq, QW, tx, m0, tokens, True)
        elif nt < HQ + HKV:
            _store_head(K, nt - HQ, acc, ssq, KW, tx, m0, tokens, True)
        else:
            _store_head(V, nt - HQ - HKV, acc, ssq, KW, tx, m0, tokens, False)

    return qkv_gemm


def _shape_key(hidden_states: torch.Tensor, *_: object) -> tuple[int, int]:
    return hidden_states.shape[0], hidden_states.shape[1]


def _build(tokens: int, k: int) -> tuple[tvm.runtime.Module, tvm.runtime.Module]:
    quant = tvm.compile(tvm.IRModule({"main": W.act_quant(tokens, k)}), target=TARGET, tir_pipeline="tirx")
    gemm = tvm.compile(tvm.IRModule({"main": _gemm(tokens, k)}), target=TARGET, tir_pipeline="tirx")
    return quant, gemm


def run(
    hidden_states: torch.Tensor,
    qkv_weight: torch.Tensor,
    qkv_scale: torch.Tensor,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    key = _shape_key(hidden_states)
    kernels = _KERNELS.get(key)
    if kernels is None:
        kernels = _KERNELS[key] = _build(*key)
    quant, gemm = kernels
    tokens, k = key
    dev = hidden_states.device
    q8 = torch.empty((tokens, k), dtype=torch.float8_e4m3fn, device=dev)
    s = torch.empty((k // W.GROUP, tokens), dtype=torch.float32, device=dev)
    quant(hidden_states.view(tokens * (k // W.GROUP), W.GROUP), q8.view(tokens * (k // W.GROUP), W.GROUP), s)
    q = torch.empty((tokens, HQ, D), dtype=torch.bfloat16, device=dev)
    kk = torch.empty((tokens, HKV, D), dtype=torch.bfloat16, device=dev)
    v = torch.empty((tokens, HKV, D), dtype=torch.bfloat16, device=dev)
    gemm(q8, qkv_weight, s, qkv_scale, q_norm_weight, k_norm_weight, q, kk, v)
    return q, kk, v
