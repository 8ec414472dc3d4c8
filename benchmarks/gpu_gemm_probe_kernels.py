"""Probe kernels of the CuTe DSL tensor-core GEMM engine (problems/_wgmma_cutedsl.py), one per variant.

Used by benchmarks/gpu_gemm_probe.py (error maps on the H200) and its GPU tests. Each kernel is the
engine's persistent loop with the plainest tile function and epilogue that exercise one of its
features, so a wrong output points at the engine, not at a problem's routing or epilogue math:

    C[l, r, n] = sum over k-tiles kt of A: f(kt, r, n) * sum_k A[r, kt bk + k] * B_l[n, (kt // kdiv) bk + k]

- A (rows, K_A) and B (N, K_B, L) K-major; `alt`: B comes from a second TMA source in odd m-tiles;
- `scaled` (fp8): f = SA[kt, r] * SB[sb, kt // kdiv], SA [K_A / 128, rows], SB [(n_b if split_n)
  x n_tiles, K_B / 128], sb = nt (split_n: w n_tiles + nt for warpgroup w); otherwise f = 1;
- n_b = 2: two B tiles a CTA tile (gate/up pairs, L = 0 and 1), each into its own output C[l];
  split_n: 64-row tiles, warpgroup w multiplies them by B tile w alone and stores C[w];
- `ctas` persistent CTAs (fewer than the tiles: each CTA walks several, the ring wraps across them).
C is float32, prefilled by the caller (a sentinel shows elements no thread stored).
"""

from __future__ import annotations

from typing import Any

import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_compact_tensor

from problems import _wgmma_cutedsl as W


class Variant:
    """One compiled configuration of the engine (all Python constants at trace time)."""

    def __init__(
        self,
        dtype: str,
        bn: int,
        *,
        n_b: int = 1,
        split_n: bool = False,
        scaled: bool = False,
        alt: bool = False,
        kdiv: int = 1,
    ) -> None:
        self.dtype, self.bn, self.n_b, self.split_n = dtype, bn, n_b, split_n
        self.scaled, self.alt, self.kdiv = scaled, alt, kdiv
        if alt and scaled:
            raise ValueError("the probe's second B source is for bf16 (shared-expert) tiles only")
        # the plain block-FP8 tile goes through the engine's own helper
        self.block_fp8 = scaled and not split_n and kdiv == 1 and n_b == 1
        self.cfg = W.GemmConfig(getattr(cutlass, dtype), bn, n_b, split_n=split_n)

    @property
    def bm(self) -> int:
        return self.cfg.bm

    @property
    def bk(self) -> int:
        return self.cfg.bk


def _kernel(v: Variant) -> Any:
    cfg = v.cfg

    @cute.kernel
    def probe_kernel(
        tiled_mma: cute.TiledMma,
        a_smem: cute.ComposedLayout,
        b_smem: cute.ComposedLayout,
        tma_a: cute.CopyAtom,
        mA: cute.Tensor,
        tma_b: cute.CopyAtom,
        mB: cute.Tensor,
        tma_alt: cute.CopyAtom,
        mAlt: cute.Tensor,
        mSA: cute.Tensor,
        mSB: cute.Tensor,
        mC: cute.Tensor,
    ):
        tidx, _, _ = cute.arch.thread_idx()
        wg = tidx // W.WG_THREADS
        rows, n = cute.size(mC, mode=[1]), cute.size(mC, mode=[2])
        m_tiles, n_tiles = (rows + cfg.bm - 1) // cfg.bm, (n + cfg.bn - 1) // cfg.bn
        k_tiles = cute.size(mA, mode=[1]) // cfg.bk

        def tile_fn(t):
            mt, nt = W.raster(t, m_tiles, n_tiles)
            b = [(nt, li) for li in range(v.n_b)]
            use_alt = False
            if cutlass.const_expr(v.alt):
                use_alt = mt % 2 == 1
            if cutlass.const_expr(v.block_fp8):
                tile = W.block_fp8_tile(mt, nt, mSA, mSB)  # the helper of the block-FP8 plans (p52-p56)
            elif cutlass.const_expr(v.scaled):
                sb = nt
                if cutlass.const_expr(v.split_n):
                    sb = wg * n_tiles + nt

                def scale(kt, row):
                    return mSA[kt, cutlass.min(mt * cfg.bm + row, rows - 1)] * mSB[sb, kt // v.kdiv]

                tile = W.Tile((mt, 0), b, k_tiles, scale, (), False, v.kdiv)
            else:
                tile = W.Tile((mt, 0), b, k_tiles, None, b if v.alt else (), use_alt)
            return tile

        def epilogue(t, tile, accs, coords, xch):
            mt, nt = tile.a[0], tile.b[0][0]
            if cutlass.const_expr(v.split_n):
                W.store_tile(mC[wg, None, None], accs[0], coords, mt * cfg.bm, nt * cfg.bn, cfg.bn)
            else:
                for li in cutlass.range_constexpr(v.n_b):
                    W.store_tile(mC[li, None, None], accs[li], coords, mt * cfg.bm, nt * cfg.bn, cfg.bn)

        W.gemm_persistent(
            cfg,
            tiled_mma,
            a_smem,
            b_smem,
            tma_a,
            mA,
            tma_b,
            mB,
            (tma_alt, mAlt) if v.alt else None,
            m_tiles * n_tiles,
            tile_fn,
            epilogue,
        )

    @cute.jit
    def probe(
        mA: cute.Tensor,
        mB: cute.Tensor,
        mAlt: cute.Tensor,
        mSA: cute.Tensor,
        mSB: cute.Tensor,
        mC: cute.Tensor,
        ctas: cutlass.Int32,
    ):
        tiled_mma, a_smem, b_smem = cfg.layouts()
        tma_a, gA = cfg.tma_a(mA, a_smem)
        tma_b, gB = cfg.tma_b(mB, b_smem)
        tma_alt, gAlt = cfg.tma_b(mAlt, b_smem)
        probe_kernel(tiled_mma, a_smem, b_smem, tma_a, gA, tma_b, gB, tma_alt, gAlt, mSA, mSB, mC).launch(
            grid=[ctas, 1, 1], block=[W.THREADS, 1, 1]
        )

    return probe


def compile_variant(v: Variant) -> Any:
    """The probe kernel of variant v with symbolic sizes, callable as
    (A (rows, K_A, 1), B (N, K_B, L), Alt (N, K_B, L), SA, SB, C (L_out, rows, N), ctas) on torch tensors."""
    elem = getattr(cutlass, v.dtype)
    rows, l_b, l_c, sa0, sb0, sb1 = (cute.sym_int() for _ in range(6))
    ka, kb = cute.sym_int(divisibility=128), cute.sym_int(divisibility=128)  # whole 128-byte TMA rows
    n = cute.sym_int(divisibility=16)
    order = (1, 0, 2)  # (rows, K, L) with K contiguous
    a = make_fake_compact_tensor(elem, (rows, ka, 1), stride_order=order, assumed_align=16)
    b = make_fake_compact_tensor(elem, (n, kb, l_b), stride_order=order, assumed_align=16)
    alt = make_fake_compact_tensor(elem, (n, kb, l_b), stride_order=order, assumed_align=16)
    sa = make_fake_compact_tensor(cutlass.Float32, (sa0, rows), stride_order=(1, 0), assumed_align=4)
    sb = make_fake_compact_tensor(cutlass.Float32, (sb0, sb1), stride_order=(1, 0), assumed_align=4)
    c = make_fake_compact_tensor(cutlass.Float32, (l_c, rows, n), stride_order=(2, 1, 0), assumed_align=16)
    return cute.compile(_kernel(v), a, b, alt, sa, sb, c, cutlass.Int32(1), options="--enable-tvm-ffi")
