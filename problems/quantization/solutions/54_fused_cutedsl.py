"""p54 qkv_projection_qk_norm_qwen3vl_fp8 — plan `fused`, CuTe DSL: activation-quant kernel + FP8 WGMMA GEMM with the
q/k RMSNorm in its epilogue.

Plan: (1) the activation-quant kernel (problems/_fp8quant_cutedsl.py) writes fp8 codes + block-major
scales. (2) The block-FP8 GEMM of `block_fp8_tile` (problems/_wgmma_cutedsl.py), persistent: 128 x 128 CTA tiles,
two warpgroups of m64n128k32 WGMMAs fed by TMA through a 6-deep mbarrier ring, per-k-tile promotion
with s_act * s_w, raster of 8 m-tiles across the 48 column tiles. A column tile is exactly one head
(q heads 0-31, k heads 32-39, v heads 40-47), so the epilogue finishes the op: for q and k tiles each
thread sums the squares of its float32 values of its two rows, the 4 lanes of a quad that share those
rows add theirs with two butterfly shuffles, and each value is scaled by rsqrt(mean + 1e-6) and the
norm weight before the single bf16 rounding; v tiles are stored as they are. Each tile writes straight
into q, k or v. Symbolic sizes: compiled once.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor

from problems import _wgmma_cutedsl as W
from problems.quantization.solutions import _fp8linear_cutedsl as L

BN = W.FP8_BN
HQ, HKV, D = 32, 8, 128
EPS = 1e-6
CFG = L.CFG


@cute.jit
def _store_head(mOut: cute.Tensor, head, acc, coords, halves, m0, tokens, mNW: cute.Tensor, normed: cutlass.Constexpr):
    """acc into mOut[:, head, :], each row RMS-normalised over the tile's 128 columns when `normed`."""
    if cutlass.const_expr(normed):
        inv = [cutlass.Float32(1.0), cutlass.Float32(1.0)]
        ssq = [cutlass.Float32(0.0), cutlass.Float32(0.0)]
        for i in cutlass.range_constexpr(cute.size(acc)):
            ssq[halves[i]] = ssq[halves[i]] + acc[i] * acc[i]
        for h in cutlass.range_constexpr(2):
            for sh in cutlass.range_constexpr(2):
                ssq[h] = ssq[h] + cute.arch.shuffle_sync_bfly(ssq[h], offset=1 << sh)
            inv[h] = cute.math.rsqrt(ssq[h] / cutlass.Float32(D) + cutlass.Float32(EPS))
        for i in cutlass.range_constexpr(cute.size(acc)):
            acc[i] = acc[i] * inv[halves[i]] * mNW[coords[i][1]].to(cutlass.Float32)
    out = cute.make_rmem_tensor(acc.shape, cutlass.BFloat16)
    out.store(acc.load().to(cutlass.BFloat16))
    for i in cutlass.range_constexpr(cute.size(acc)):
        row = m0 + coords[i][0]
        if row < tokens:
            mOut[row, head, coords[i][1]] = out[i]


@cute.kernel
def _qkv_kernel(
    tiled_mma: cute.TiledMma,
    a_smem: cute.ComposedLayout,
    b_smem: cute.ComposedLayout,
    tma_a: cute.CopyAtom,
    mA: cute.Tensor,
    tma_b: cute.CopyAtom,
    mB: cute.Tensor,
    mSA: cute.Tensor,
    mSB: cute.Tensor,
    mQW: cute.Tensor,
    mKW: cute.Tensor,
    mQ: cute.Tensor,
    mK: cute.Tensor,
    mV: cute.Tensor,
):
    tokens = cute.size(mQ, mode=[0])
    m_tiles = (tokens + W.BM - 1) // W.BM
    halves = W.row_halves(tiled_mma, W.BM, BN)

    def tile_fn(t):
        mt, nt = W.raster(t, m_tiles, HQ + 2 * HKV)
        return W.block_fp8_tile(mt, nt, mSA, mSB)

    def epilogue(t, tile, accs, coords, xch):
        m0, nt = tile.a[0] * W.BM, tile.b[0][0]
        if nt < HQ:
            _store_head(mQ, nt, accs[0], coords, halves, m0, tokens, mQW, True)
        elif nt < HQ + HKV:
            _store_head(mK, nt - HQ, accs[0], coords, halves, m0, tokens, mKW, True)
        else:
            _store_head(mV, nt - HQ - HKV, accs[0], coords, halves, m0, tokens, mKW, False)

    W.gemm_persistent(
        CFG, tiled_mma, a_smem, b_smem, tma_a, mA, tma_b, mB, None, m_tiles * (HQ + 2 * HKV), tile_fn, epilogue
    )


@cute.jit
def _qkv(
    mA: cute.Tensor,
    mB: cute.Tensor,
    mSA: cute.Tensor,
    mSB: cute.Tensor,
    mQW: cute.Tensor,
    mKW: cute.Tensor,
    mQ: cute.Tensor,
    mK: cute.Tensor,
    mV: cute.Tensor,
):
    tiled_mma, a_smem, b_smem = CFG.layouts()
    tma_a, gA = CFG.tma_a(mA, a_smem)
    tma_b, gB = CFG.tma_b(mB, b_smem)
    _qkv_kernel(tiled_mma, a_smem, b_smem, tma_a, gA, tma_b, gB, mSA, mSB, mQW, mKW, mQ, mK, mV).launch(
        grid=[W.SMS, 1, 1], block=[W.THREADS, 1, 1]
    )


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        t, k, kb = (cute.sym_int() for _ in range(3))
        n = (HQ + 2 * HKV) * D
        a = make_fake_compact_tensor(cutlass.Float8E4M3FN, (t, k, 1), stride_order=(1, 0, 2), assumed_align=16)
        b = make_fake_compact_tensor(cutlass.Float8E4M3FN, (n, k, 1), stride_order=(1, 0, 2), assumed_align=16)
        sa = make_fake_compact_tensor(cutlass.Float32, (kb, t), stride_order=(1, 0), assumed_align=4)
        sb = make_fake_compact_tensor(cutlass.Float32, (n // BN, kb), stride_order=(1, 0), assumed_align=4)
        w = make_fake_compact_tensor(cutlass.BFloat16, (D,), assumed_align=16)
        q = make_fake_compact_tensor(cutlass.BFloat16, (t, HQ, D), stride_order=(2, 1, 0), assumed_align=16)
        kv = make_fake_compact_tensor(cutlass.BFloat16, (t, HKV, D), stride_order=(2, 1, 0), assumed_align=16)
        _COMPILED.append(L.compiled()[0])
        _COMPILED.append(cute.compile(_qkv, a, b, sa, sb, w, w, q, kv, kv, options="--enable-tvm-ffi"))
    return _COMPILED


def run(
    hidden_states: torch.Tensor,
    qkv_weight: torch.Tensor,
    qkv_scale: torch.Tensor,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    quant, qkv = _compiled()
    tokens = hidden_states.shape[0]
    q8, s = L.quantize(hidden_states, quant)
    dev = hidden_states.device
    q = torch.empty((tokens, HQ, D), dtype=torch.bfloat16, device=dev)
    k = torch.empty((tokens, HKV, D), dtype=torch.bfloat16, device=dev)
    v = torch.empty((tokens, HKV, D), dtype=torch.bfloat16, device=dev)
    qkv(W.rows_k_l(q8), W.rows_k_l(qkv_weight), s, qkv_scale, q_norm_weight, k_norm_weight, q, k, v)
    return q, k, v
