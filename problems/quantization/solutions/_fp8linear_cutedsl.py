"""W8A8 block-FP8 linear y = x @ W^T (bf16 out) in CuTe DSL: the full plan shared by p52 and p53 (DESIGN §5).

(1) The activation-quant kernel (problems/_fp8quant_cutedsl.py) quantises the bf16 activation per
(token, 128-channel group) as the ops define it (IEEE division, round to nearest even) and writes fp8
codes [T, K] and float32 scales block-major [K / 128, T]. (2) The block-scaled FP8 GEMM on tensor
cores (problems/_wgmma_cutedsl.py): 128 x 128 CTA tiles, two warpgroups of m64n128k32 WGMMAs,
operands brought in by TMA through a 6-deep mbarrier ring, tiles rastered 8 m-tiles at a time across
N so weight tiles are reused from L2 (persistent: one CTA per SM walks the tiles). Per 128-wide k-tile
the WGMMAs accumulate into a fresh float32 temporary, promoted into the accumulator with
s_act[t, kt] * s_w[n / 128, kt] (DeepGEMM style). The epilogue rounds to bf16 and stores each thread's
column pairs. Symbolic sizes: one compilation of each
kernel, cached, called with torch tensors through TVM FFI.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor

from problems import _fp8quant_cutedsl as Q
from problems import _wgmma_cutedsl as W

BN = 128  # one 128-row weight scale block per CTA column tile
CFG = W.GemmConfig(cutlass.Float8E4M3FN, BN)


@cute.kernel
def _gemm_kernel(
    tiled_mma: cute.TiledMma,
    a_smem: cute.ComposedLayout,
    b_smem: cute.ComposedLayout,
    tma_a: cute.CopyAtom,
    mA: cute.Tensor,
    tma_b: cute.CopyAtom,
    mB: cute.Tensor,
    mSA: cute.Tensor,
    mSB: cute.Tensor,
    mO: cute.Tensor,
):
    tokens, n = cute.size(mO, mode=[0]), cute.size(mO, mode=[1])
    m_tiles, n_tiles = (tokens + W.BM - 1) // W.BM, (n + BN - 1) // BN

    def tile_fn(t):
        mt, nt = W.raster(t, m_tiles, n_tiles)
        return W.block_fp8_tile(mt, nt, mSA, mSB)

    def epilogue(t, tile, accs, coords, xch):
        out = cute.make_rmem_tensor(accs[0].shape, mO.element_type)
        out.store(accs[0].load().to(mO.element_type))
        # TMA zero-fills B rows past N; their columns are not stored
        W.store_tile(mO, out, coords, tile.a[0] * W.BM, tile.b[0][0] * BN, BN)

    W.gemm_persistent(
        CFG, tiled_mma, a_smem, b_smem, tma_a, mA, tma_b, mB, None, m_tiles * n_tiles, tile_fn, epilogue
    )


@cute.jit
def _gemm(mA: cute.Tensor, mB: cute.Tensor, mSA: cute.Tensor, mSB: cute.Tensor, mO: cute.Tensor):
    tiled_mma, a_smem, b_smem = CFG.layouts()
    tma_a, gA = CFG.tma_a(mA, a_smem)
    tma_b, gB = CFG.tma_b(mB, b_smem)
    _gemm_kernel(tiled_mma, a_smem, b_smem, tma_a, gA, tma_b, gB, mSA, mSB, mO).launch(
        grid=[W.SMS, 1, 1], block=[W.THREADS, 1, 1]
    )


_COMPILED: dict[tuple[type, bool], tuple] = {}
OUT_TYPES = {torch.bfloat16: cutlass.BFloat16, torch.float32: cutlass.Float32}


def compiled(out_dtype: torch.dtype = torch.bfloat16, *, ue8m0: bool = False) -> tuple:
    """(activation quantiser, block-FP8 GEMM with `out_dtype` output), compiled once with symbolic sizes."""
    key = (OUT_TYPES[out_dtype], ue8m0)
    if key not in _COMPILED:
        t, kb, nb = (cute.sym_int() for _ in range(3))
        k, n = cute.sym_int(divisibility=128), cute.sym_int(divisibility=64)
        a = make_fake_compact_tensor(
            cutlass.Float8E4M3FN, (t, k, 1), stride_order=(1, 0, 2), assumed_align=16
        )
        b = make_fake_compact_tensor(
            cutlass.Float8E4M3FN, (n, k, 1), stride_order=(1, 0, 2), assumed_align=16
        )
        sa = make_fake_compact_tensor(cutlass.Float32, (kb, t), stride_order=(1, 0), assumed_align=4)
        sb = make_fake_compact_tensor(cutlass.Float32, (nb, kb), stride_order=(1, 0), assumed_align=4)
        o = make_fake_compact_tensor(key[0], (t, n), stride_order=(1, 0), assumed_align=16)
        gemm = cute.compile(_gemm, a, b, sa, sb, o, options="--enable-tvm-ffi")
        _COMPILED[key] = (Q.compiled(ue8m0=ue8m0), gemm)
    return _COMPILED[key]


def quantize(x: torch.Tensor, quant) -> tuple[torch.Tensor, torch.Tensor]:
    """fp8 codes [T, K] and block-major scales [K / 128, T] of a contiguous bf16 activation [T, K]."""
    tokens, k = x.shape
    q = torch.empty((tokens, k), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((k // Q.GROUP, tokens), dtype=torch.float32, device=x.device)
    quant(x.view(tokens * (k // Q.GROUP), Q.GROUP), q.view(tokens * (k // Q.GROUP), Q.GROUP), s)
    return q, s


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
    quant, gemm = compiled(out_dtype, ue8m0=ue8m0)
    q, s = quantize(x, quant)
    out = torch.empty((x.shape[0], weight.shape[0]), dtype=out_dtype, device=x.device)
    gemm(W.rows_k_l(q), W.rows_k_l(weight), s, weight_scale, out)
    return out
