"""p21 dynamic_quantized_cache_append_per_token_head_fp8 — plan `fused`, CuTe DSL: one kernel, K and V.

Plan: a half-warp owns one (token, KV head) row of 128 bf16 (16 threads × 8 values): each thread loads
16 bytes of the key row and 16 of the value row, reduces max|x| over its 16 lanes with butterfly
shuffles in float32, computes scale = max(absmax / 448, 1e-6) and q = clamp(x * (1 / scale), ±448),
converts its 8 values to e4m3 (round to nearest even) and stores the 8 code bytes with one 8-byte
store into the destination slot; lane 0 writes the float32 scale. Padding tokens (slot -1) write
nothing. The fp8 caches travel as uint8 views (no fp8 DLPack needed). 256 threads = 2 tokens × 8 heads
per CTA. Symbolic sizes: one compilation, cached, called with torch tensors through TVM FFI.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor

HEADS = 8
DIM = 128
VEC = 8  # bf16 per 16-byte load
LANES = DIM // VEC  # threads per (token, head)
THREADS = 256
PAIRS_PER_CTA = THREADS // LANES
FP8_MAX = 448.0
SCALE_FLOOR = 1e-6


@cute.jit
def _quantize(x: cute.TensorSSA, amax: cutlass.Float32, gQ: cute.Tensor, gS: cute.Tensor, lane: cutlass.Int32):
    scale = cute.arch.fmax(amax / cutlass.Float32(FP8_MAX), cutlass.Float32(SCALE_FLOOR))
    inv = cutlass.Float32(1.0) / scale
    rF = cute.make_rmem_tensor((VEC,), cutlass.Float32)
    rF.store(x * inv)
    for i in cutlass.range_constexpr(VEC):
        rF[i] = cute.arch.fmin(cute.arch.fmax(rF[i], cutlass.Float32(-FP8_MAX)), cutlass.Float32(FP8_MAX))
    rQ = cute.make_rmem_tensor((VEC,), cutlass.Float8E4M3FN)
    rQ.store(rF.load().to(cutlass.Float8E4M3FN))
    cute.autovec_copy(cute.recast_tensor(rQ, cutlass.Uint8), gQ)
    if lane == 0:
        gS[0] = scale


@cute.kernel
def _append_kernel(
    mK: cute.Tensor,
    mV: cute.Tensor,
    mSlot: cute.Tensor,
    mKC: cute.Tensor,
    mVC: cute.Tensor,
    mKS: cute.Tensor,
    mVS: cute.Tensor,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    tokens = cute.size(mK, mode=[0])
    pair = bidx * PAIRS_PER_CTA + tidx // LANES
    tok = pair // HEADS
    head = pair % HEADS
    lane = tidx % LANES
    # ((1, 1, VEC), (tokens, HEADS, LANES)) views: one 16-byte vector (8 bytes for codes) per lane
    gK = cute.zipped_divide(mK, (1, 1, VEC))
    gV = cute.zipped_divide(mV, (1, 1, VEC))
    gKC = cute.zipped_divide(mKC, (1, 1, VEC))
    gVC = cute.zipped_divide(mVC, (1, 1, VEC))
    rK = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    rV = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    rK.fill(0.0)
    rV.fill(0.0)
    slot = cutlass.Int32(-1)
    if tok < tokens:
        slot = cutlass.Int32(mSlot[tok])
        cute.autovec_copy(gK[(0, 0, None), (tok, head, lane)], rK)
        cute.autovec_copy(gV[(0, 0, None), (tok, head, lane)], rV)
    k = rK.load().to(cutlass.Float32)
    v = rV.load().to(cutlass.Float32)
    kmax = cutlass.Float32(0.0)
    vmax = cutlass.Float32(0.0)
    for i in cutlass.range_constexpr(VEC):
        kmax = cute.arch.fmax(kmax, cute.math.absf(k[i]))
        vmax = cute.arch.fmax(vmax, cute.math.absf(v[i]))
    # every lane shuffles (out-of-range rows carry zeros), so full-mask shuffles are safe
    for i in cutlass.range_constexpr(4):
        kmax = cute.arch.fmax(kmax, cute.arch.shuffle_sync_bfly(kmax, offset=LANES >> (i + 1)))
        vmax = cute.arch.fmax(vmax, cute.arch.shuffle_sync_bfly(vmax, offset=LANES >> (i + 1)))
    if slot >= 0:
        _quantize(k, kmax, gKC[(0, 0, None), (slot, head, lane)], mKS[slot, head, None], lane)
        _quantize(v, vmax, gVC[(0, 0, None), (slot, head, lane)], mVS[slot, head, None], lane)


@cute.jit
def _append(
    mK: cute.Tensor,
    mV: cute.Tensor,
    mSlot: cute.Tensor,
    mKC: cute.Tensor,
    mVC: cute.Tensor,
    mKS: cute.Tensor,
    mVS: cute.Tensor,
):
    pairs = cute.size(mK, mode=[0]) * HEADS
    _append_kernel(mK, mV, mSlot, mKC, mVC, mKS, mVS).launch(
        grid=[(pairs + PAIRS_PER_CTA - 1) // PAIRS_PER_CTA, 1, 1], block=[THREADS, 1, 1]
    )


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        tokens, slots = cute.sym_int(), cute.sym_int()
        kv = make_fake_compact_tensor(cutlass.BFloat16, (tokens, HEADS, DIM), stride_order=(2, 1, 0), assumed_align=16)
        slot = make_fake_compact_tensor(cutlass.Int64, (tokens,), assumed_align=8)
        cache = make_fake_compact_tensor(cutlass.Uint8, (slots, HEADS, DIM), stride_order=(2, 1, 0), assumed_align=16)
        # scales as [slots, HEADS, 1] so a slice is a 1-element tensor
        scale = make_fake_compact_tensor(cutlass.Float32, (slots, HEADS, 1), stride_order=(2, 1, 0), assumed_align=4)
        _COMPILED.append(cute.compile(_append, kv, kv, slot, cache, cache, scale, scale, options="--enable-tvm-ffi"))
    return _COMPILED[0]


def run(
    key: torch.Tensor,
    value: torch.Tensor,
    slot_mapping: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    k_scale_cache: torch.Tensor,
    v_scale_cache: torch.Tensor,
) -> tuple[()]:
    kernel = _compiled()
    nb, bs = key_cache.shape[0], key_cache.shape[1]
    slots = nb * bs
    # in-place updates through uint8 / reshaped views of the same storage
    kernel(
        key.contiguous(),
        value.contiguous(),
        slot_mapping.contiguous(),
        key_cache.view(torch.uint8).view(slots, HEADS, DIM),
        value_cache.view(torch.uint8).view(slots, HEADS, DIM),
        k_scale_cache.view(slots, HEADS, 1),
        v_scale_cache.view(slots, HEADS, 1),
    )
    return ()
