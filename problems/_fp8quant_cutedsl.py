"""Dynamic per-token-group fp8 activation quantisation in CuTe DSL (the A operand of the block-FP8 GEMMs).

X [groups, 128] bf16 (a [tokens, K] activation viewed as its 128-channel groups, token-major) ->
Q [groups, 128] fp8 e4m3 codes and S [K / 128, tokens] float32 scales, block-major so a GEMM k-tile
reads the scales of its rows contiguously. A half-warp owns one (token, group): 16 lanes x 8 bf16 (one
16-byte load each), amax reduced with butterfly shuffles in float32; s = max(amax, 1e-10) / 448
(rounded up to a power of two for UE8M0 checkpoints, exactly, from the float bits);
q = fp8_e4m3(clamp(x / s, +-448)) with IEEE division, round to nearest even. DESIGN §5.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_compact_tensor

GROUP = 128
VEC = 8  # bf16 per 16-byte load
LANES = GROUP // VEC  # threads per (token, group)
THREADS = 256
GROUPS_PER_CTA = THREADS // LANES
FP8_MAX = 448.0
GROUP_EPS = 1e-10


def _kernel(ue8m0: bool):
    @cute.kernel
    def quant_kernel(mX: cute.Tensor, mQ: cute.Tensor, mS: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        groups = cute.size(mX, mode=[0])
        kb = cute.size(mS, mode=[0])
        grp = bidx * GROUPS_PER_CTA + tidx // LANES
        lane = tidx % LANES
        gX = cute.zipped_divide(mX, (1, VEC))  # ((1, VEC), (groups, LANES))
        gQ = cute.zipped_divide(mQ, (1, VEC))
        rX = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
        rX.fill(0.0)
        if grp < groups:
            cute.autovec_copy(gX[(0, None), (grp, lane)], rX)
        x = rX.load().to(cutlass.Float32)
        amax = cutlass.Float32(0.0)
        for i in cutlass.range_constexpr(VEC):
            amax = cute.arch.fmax(amax, cute.math.absf(x[i]))
        # every lane shuffles (out-of-range groups carry zeros), so full-mask shuffles are safe
        for i in cutlass.range_constexpr(4):
            amax = cute.arch.fmax(amax, cute.arch.shuffle_sync_bfly(amax, offset=(LANES // 2) >> i))
        scale = cute.arch.fmax(amax, cutlass.Float32(GROUP_EPS)) / cutlass.Float32(FP8_MAX)
        if cutlass.const_expr(ue8m0):
            # 2^ceil(log2 s): keep the exponent, add one unless the mantissa is zero
            rs = cute.make_rmem_tensor((1,), cutlass.Float32)
            rs[0] = scale
            bits = cute.recast_tensor(rs, cutlass.Int32)[0]
            up = cutlass.Int32(cutlass.select_((bits & 0x7FFFFF) != 0, cutlass.Int32(1), cutlass.Int32(0)))
            ri = cute.make_rmem_tensor((1,), cutlass.Int32)
            ri[0] = ((bits >> 23) + up) << 23
            scale = cute.recast_tensor(ri, cutlass.Float32)[0]
        rF = cute.make_rmem_tensor((VEC,), cutlass.Float32)
        for i in cutlass.range_constexpr(VEC):
            rF[i] = cute.arch.fmin(
                cute.arch.fmax(x[i] / scale, cutlass.Float32(-FP8_MAX)), cutlass.Float32(FP8_MAX)
            )
        rQ = cute.make_rmem_tensor((VEC,), cutlass.Float8E4M3FN)
        rQ.store(rF.load().to(cutlass.Float8E4M3FN))
        if grp < groups:
            cute.autovec_copy(rQ, gQ[(0, None), (grp, lane)])
            if lane == 0:
                mS[grp % kb, grp // kb] = scale

    @cute.jit
    def quant(mX: cute.Tensor, mQ: cute.Tensor, mS: cute.Tensor):
        groups = cute.size(mX, mode=[0])
        quant_kernel(mX, mQ, mS).launch(
            grid=[(groups + GROUPS_PER_CTA - 1) // GROUPS_PER_CTA, 1, 1], block=[THREADS, 1, 1]
        )

    return quant


_COMPILED: dict[bool, object] = {}


def compiled(*, ue8m0: bool = False):
    """The compiled quantiser (symbolic sizes): call as (x [groups, 128], q [groups, 128], s [K/128, T])."""
    if ue8m0 not in _COMPILED:
        groups, kb, tokens = (cute.sym_int() for _ in range(3))
        x = make_fake_compact_tensor(cutlass.BFloat16, (groups, GROUP), stride_order=(1, 0), assumed_align=16)
        q = make_fake_compact_tensor(
            cutlass.Float8E4M3FN, (groups, GROUP), stride_order=(1, 0), assumed_align=16
        )
        s = make_fake_compact_tensor(cutlass.Float32, (kb, tokens), stride_order=(1, 0), assumed_align=4)
        _COMPILED[ue8m0] = cute.compile(_kernel(ue8m0), x, q, s, options="--enable-tvm-ffi")
    return _COMPILED[ue8m0]
