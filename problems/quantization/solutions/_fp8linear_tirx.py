"""W8A8 block-FP8 linear y = x @ W^T (bf16 out) in TIRx: the full plan shared by p52 and p53 (DESIGN §5).

(1) `act_quant` (problems/_wgmma_tirx.py) quantises the bf16 activation per (token, 128-channel group)
as the ops define it and writes fp8 codes [T, K] and float32 scales block-major [K / 128, T]. (2) The
block-scaled FP8 GEMM on tensor cores: 128 x 128 CTA tiles (two warpgroups of m64n128k32 WGMMAs) in
the raster order of `raster` (8 m-tiles at a time across N, so each weight tile is reused from L2);
per 128-wide k-tile the WGMMAs accumulate into a fresh float32 temporary promoted into the accumulator
with s_act[t, kt] * s_w[n / 128, kt] (DeepGEMM style); cp.async fills a 6-deep shared-memory ring in
the 128-byte-swizzled layout WGMMA reads. The epilogue rounds to bf16 and stores each thread's
column pairs (4-byte stores). Compiled once per (tokens, K, N).
"""

import torch
import tvm
from tvm.script import tirx as T

from problems import _wgmma_tirx as W

BN = W.FP8_BN
NREG = BN // 2
TARGET = {"kind": "cuda", "arch": "sm_90a"}

_KERNELS: dict[tuple, tuple[tvm.runtime.Module, tvm.runtime.Module]] = {}


def gemm(tokens: int, k: int, n: int, out_dtype: str = "bfloat16"):
    """The block-FP8 GEMM prim_func: (A fp8 [T, K], B fp8 [N, K], SA [K/128, T], SB [ceil(N/128), K/128])
    -> OUT [T, N] in `out_dtype`; N a multiple of 64."""
    if k % W.GROUP or n % 64:
        raise ValueError(f"K {k} must be a multiple of 128 and N {n} of 64")
    k_tiles = k // W.GROUP
    m_tiles = (tokens + W.BM - 1) // W.BM
    n_tiles = (n + BN - 1) // BN

    @T.prim_func
    def fp8_gemm(a_ptr: T.handle, b_ptr: T.handle, sa_ptr: T.handle, sb_ptr: T.handle, o_ptr: T.handle):
        A = T.match_buffer(a_ptr, (tokens, k), "float8_e4m3fn")
        B = T.match_buffer(b_ptr, (n, k), "float8_e4m3fn")
        SA = T.match_buffer(sa_ptr, (k_tiles, tokens), "float32")
        SB = T.match_buffer(sb_ptr, (n_tiles, k_tiles), "float32")
        OUT = T.match_buffer(o_ptr, (tokens, n), out_dtype)
        T.device_entry()
        bx = T.cta_id([m_tiles * n_tiles])
        tx = T.thread_id([W.THREADS])
        pool = T.alloc_buffer((W.smem_bytes(BN),), "uint8", scope="shared.dyn", align=1024)
        acc = T.alloc_local((NREG,), "float32")
        tmp = T.alloc_local((NREG,), "float32")
        mt, nt = T.meta_var(W.raster(bx, m_tiles, n_tiles))
        m0 = T.meta_var(mt * W.BM)
        W.block_fp8_mainloop(pool, acc, tmp, tx, A, B, SA, SB, tokens, n, m0, nt, k_tiles)
        for i in T.unroll(2):
            if m0 + W.frag_row(tx, i) < tokens:
                for j in T.unroll(BN // 8):
                    if n % BN == 0 or nt * BN + 8 * j < n:
                        for c in T.vectorized(2):
                            OUT[m0 + W.frag_row(tx, i), nt * BN + W.frag_col(tx, j, c)] = T.Cast(
                                out_dtype, acc[4 * j + 2 * i + c]
                            )

    return fp8_gemm


def build(
    tokens: int, k: int, n: int, out_dtype: str = "bfloat16", *, ue8m0: bool = False
) -> tuple[tvm.runtime.Module, tvm.runtime.Module]:
    """(activation quantiser, block-FP8 GEMM) modules."""
    quant = tvm.compile(
        tvm.IRModule({"main": W.act_quant(tokens, k, ue8m0=ue8m0)}), target=TARGET, tir_pipeline="tirx"
    )
    fp8_gemm = tvm.compile(
        tvm.IRModule({"main": gemm(tokens, k, n, out_dtype)}), target=TARGET, tir_pipeline="tirx"
    )
    return quant, fp8_gemm


def linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    weight_scale: torch.Tensor,
    out_dtype: torch.dtype = torch.bfloat16,
    *,
    ue8m0: bool = False,
) -> torch.Tensor:
    """x [T, K] bf16 (contiguous), weight [N, K] fp8, weight_scale [ceil(N/128), K/128] -> [T, N] in
    out_dtype (bf16 or float32); `ue8m0` rounds the activation scales up to powers of two."""
    tokens, k = x.shape
    n = weight.shape[0]
    key = (tokens, k, n, str(out_dtype).removeprefix("torch."), ue8m0)
    kernels = _KERNELS.get(key)
    if kernels is None:
        kernels = _KERNELS[key] = build(*key[:4], ue8m0=ue8m0)
    quant, fp8_gemm = kernels
    q = torch.empty((tokens, k), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((k // W.GROUP, tokens), dtype=torch.float32, device=x.device)
    quant(x.view(tokens * (k // W.GROUP), W.GROUP), q.view(tokens * (k // W.GROUP), W.GROUP), s)
    out = torch.empty((tokens, n), dtype=out_dtype, device=x.device)
    fp8_gemm(q, weight, s, weight_scale, out)
    return out
