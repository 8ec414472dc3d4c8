"""p19 qk_rmsnorm_partial_rope_paged_kv_update_glm4_bf16 — plan `fused`, CuTe DSL: one kernel, q, k and v.

Plan: one CTA of 224 threads per token (8192 CTAs at the production shape). A token's qkv row is 112
heads of 128 bf16 (96 q, 8 k, 8 v). Eight threads own a head, each two 16-byte vectors chosen so the
partial NeoX rotation needs no data exchange: lane l < 4 holds dims 8l..8l+7 and their rotary
partners 32+8l..32+8l+7, lane l >= 4 holds pass-through dims 64+8(l-4).. and 96+8(l-4)... The 28
head groups of a CTA cover heads 28p + g in 4 passes (p = 0..3); a thread issues all 8 of its 16-byte
qkv loads before any math (every warp instruction reads 8 fully used 64-byte runs). Per q/k head:
sum of squares over the 16 values, butterfly shuffles over the 8 lanes (all lanes of a warp take part:
q/k/v boundaries fall on warp boundaries), inv = rsqrt(ss/128 + 1e-5), n = x * inv * w (float32),
then y_a = n_a c - n_b s, y_b = n_b c + n_a s with c, s of the token's position (two 16-byte float32
loads each, L1/L2 resident; lanes >= 4 use c = 1, s = 0, which is exact), one bf16 rounding, two
16-byte stores: q heads to q_out, k heads to key_cache[slot // 16, slot % 16], v heads (raw bit
copies) to value_cache, cache writes only when slot >= 0. Every byte is read once and written once.
Launched with min_blocks_per_mp=3 so 3 CTAs (672 threads, 86 KB of loads in flight) fit an SM. The
caches are updated in place. All sizes are symbolic: one compilation, cached, called with torch
tensors through TVM FFI.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor

HQ = 96
HKV = 8
HEADS = HQ + 2 * HKV  # 112 heads per qkv row
DIM = 128
ROT_HALF = 32  # rotary_dim / 2
BLOCK = 16
VEC = 8  # bf16 per 16-byte vector
FVEC = 4  # float32 per 16-byte vector
LANES = 8  # threads per head, 2 vectors each
GROUPS = 28  # heads per pass
PASSES = HEADS // GROUPS  # 4
THREADS = GROUPS * LANES  # 224
Q_LAST = HQ - (PASSES - 1) * GROUPS  # q groups of the last pass (12)
K_LAST = Q_LAST + HKV  # 20
EPS = 1e-5


@cute.jit
def _norm_rope(
    ra: cute.Tensor,
    rb: cute.Tensor,
    rwa: cute.Tensor,
    rwb: cute.Tensor,
    c: cute.TensorSSA,
    s: cute.TensorSSA,
    oa: cute.Tensor,
    ob: cute.Tensor,
):
    xa = ra.load().to(cutlass.Float32)
    xb = rb.load().to(cutlass.Float32)
    ss = (xa * xa).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), reduction_profile=0)
    ss = ss + (xb * xb).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), reduction_profile=0)
    for i in cutlass.range_constexpr(3):
        ss = ss + cute.arch.shuffle_sync_bfly(ss, offset=(LANES // 2) >> i)
    inv = cute.math.rsqrt(ss * cutlass.Float32(1.0 / DIM) + cutlass.Float32(EPS))
    na = (xa * inv) * rwa.load().to(cutlass.Float32)
    nb = (xb * inv) * rwb.load().to(cutlass.Float32)
    oa.store((na * c - nb * s).to(cutlass.BFloat16))
    ob.store((nb * c + na * s).to(cutlass.BFloat16))


@cute.kernel
def _glm_kernel(
    mX: cute.Tensor,
    mWQ: cute.Tensor,
    mWK: cute.Tensor,
    mPos: cute.Tensor,
    mCS: cute.Tensor,
    mSlot: cute.Tensor,
    mKC: cute.Tensor,
    mVC: cute.Tensor,
    mO: cute.Tensor,
):
    tidx, _, _ = cute.arch.thread_idx()
    tok, _, _ = cute.arch.block_idx()
    lane = tidx % LANES
    grp = tidx // LANES
    quad = lane % 4
    # 16-byte vector indices (of 16 per head) of the thread's two vectors: va, and its partner va + 4
    va = (lane // 4) * 8 + quad
    vb = va + 4
    # ((1, 1, VEC), (tokens, heads, 16)) head views, ((VEC,), (16,)) weights, ((1, FVEC), (max_pos, 16)) cos/sin,
    # ((1, 1, 1, VEC), (blocks, 16, 8, 16)) caches
    gX = cute.zipped_divide(mX, (1, 1, VEC))
    gO = cute.zipped_divide(mO, (1, 1, VEC))
    gWQ = cute.zipped_divide(mWQ, (VEC,))
    gWK = cute.zipped_divide(mWK, (VEC,))
    gCS = cute.zipped_divide(mCS, (1, FVEC))
    gKC = cute.zipped_divide(mKC, (1, 1, 1, VEC))
    gVC = cute.zipped_divide(mVC, (1, 1, 1, VEC))
    pos = cutlass.Int32(mPos[tok])
    slot = cutlass.Int32(mSlot[tok])
    xa = []
    xb = []
    for p in cutlass.range_constexpr(PASSES):
        ra = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
        rb = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
        cute.autovec_copy(gX[(0, 0, None), (tok, p * GROUPS + grp, va)], ra)
        cute.autovec_copy(gX[(0, 0, None), (tok, p * GROUPS + grp, vb)], rb)
        xa.append(ra)
        xb.append(rb)
    rWQa = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    rWQb = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    rWKa = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    rWKb = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    cute.autovec_copy(gWQ[(None,), (va,)], rWQa)
    cute.autovec_copy(gWQ[(None,), (vb,)], rWQb)
    cute.autovec_copy(gWK[(None,), (va,)], rWKa)
    cute.autovec_copy(gWK[(None,), (vb,)], rWKb)
    # cos/sin of rotary indices 8 quad .. 8 quad + 7 (lanes < 4); lanes >= 4 pass through with c = 1, s = 0
    rC = cute.make_rmem_tensor((VEC,), cutlass.Float32)
    rS = cute.make_rmem_tensor((VEC,), cutlass.Float32)
    rC.fill(1.0)
    rS.fill(0.0)
    if lane < 4:
        cC0 = cute.make_rmem_tensor((FVEC,), cutlass.Float32)
        cC1 = cute.make_rmem_tensor((FVEC,), cutlass.Float32)
        cS0 = cute.make_rmem_tensor((FVEC,), cutlass.Float32)
        cS1 = cute.make_rmem_tensor((FVEC,), cutlass.Float32)
        cute.autovec_copy(gCS[(0, None), (pos, 2 * quad)], cC0)
        cute.autovec_copy(gCS[(0, None), (pos, 2 * quad + 1)], cC1)
        cute.autovec_copy(gCS[(0, None), (pos, ROT_HALF // FVEC + 2 * quad)], cS0)
        cute.autovec_copy(gCS[(0, None), (pos, ROT_HALF // FVEC + 2 * quad + 1)], cS1)
        for i in cutlass.range_constexpr(FVEC):
            rC[i] = cC0[i]
            rC[FVEC + i] = cC1[i]
            rS[i] = cS0[i]
            rS[FVEC + i] = cS1[i]
    c = rC.load()
    s = rS.load()
    oa = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    ob = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    for p in cutlass.range_constexpr(PASSES - 1):
        _norm_rope(xa[p], xb[p], rWQa, rWQb, c, s, oa, ob)
        cute.autovec_copy(oa, gO[(0, 0, None), (tok, p * GROUPS + grp, va)])
        cute.autovec_copy(ob, gO[(0, 0, None), (tok, p * GROUPS + grp, vb)])
    # last pass: groups 0..11 are q heads 84..95, 12..19 the k heads, 20..27 the v heads (warp-uniform)
    blk = slot // BLOCK
    row = slot % BLOCK
    last = PASSES - 1
    if grp < Q_LAST:
        _norm_rope(xa[last], xb[last], rWQa, rWQb, c, s, oa, ob)
        cute.autovec_copy(oa, gO[(0, 0, None), (tok, last * GROUPS + grp, va)])
        cute.autovec_copy(ob, gO[(0, 0, None), (tok, last * GROUPS + grp, vb)])
    elif grp < K_LAST:
        _norm_rope(xa[last], xb[last], rWKa, rWKb, c, s, oa, ob)
        if slot >= 0:
            cute.autovec_copy(oa, gKC[(0, 0, 0, None), (blk, row, grp - Q_LAST, va)])
            cute.autovec_copy(ob, gKC[(0, 0, 0, None), (blk, row, grp - Q_LAST, vb)])
    else:
        if slot >= 0:
            cute.autovec_copy(xa[last], gVC[(0, 0, 0, None), (blk, row, grp - K_LAST, va)])
            cute.autovec_copy(xb[last], gVC[(0, 0, 0, None), (blk, row, grp - K_LAST, vb)])


@cute.jit
def _glm(
    mX: cute.Tensor,
    mWQ: cute.Tensor,
    mWK: cute.Tensor,
    mPos: cute.Tensor,
    mCS: cute.Tensor,
    mSlot: cute.Tensor,
    mKC: cute.Tensor,
    mVC: cute.Tensor,
    mO: cute.Tensor,
):
    tokens = cute.size(mX, mode=[0])
    _glm_kernel(mX, mWQ, mWK, mPos, mCS, mSlot, mKC, mVC, mO).launch(
        grid=[tokens, 1, 1], block=[THREADS, 1, 1], min_blocks_per_mp=3, preferred_smem_carveout=100
    )


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        tokens, max_pos, blocks = cute.sym_int(), cute.sym_int(), cute.sym_int()
        x = make_fake_compact_tensor(cutlass.BFloat16, (tokens, HEADS, DIM), stride_order=(2, 1, 0), assumed_align=16)
        w = make_fake_compact_tensor(cutlass.BFloat16, (DIM,), assumed_align=16)
        idx = make_fake_compact_tensor(cutlass.Int64, (tokens,), assumed_align=8)
        cs = make_fake_compact_tensor(cutlass.Float32, (max_pos, 2 * ROT_HALF), stride_order=(1, 0), assumed_align=16)
        cache = make_fake_compact_tensor(
            cutlass.BFloat16, (blocks, BLOCK, HKV, DIM), stride_order=(3, 2, 1, 0), assumed_align=16
        )
        out = make_fake_compact_tensor(cutlass.BFloat16, (tokens, HQ, DIM), stride_order=(2, 1, 0), assumed_align=16)
        _COMPILED.append(cute.compile(_glm, x, w, w, idx, cs, idx, cache, cache, out, options="--enable-tvm-ffi"))
    return _COMPILED[0]


def run(
    qkv: torch.Tensor,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
) -> torch.Tensor:
    tokens = qkv.shape[0]
    out = torch.empty((tokens, HQ, DIM), dtype=qkv.dtype, device=qkv.device)
    if tokens == 0:
        return out
    # the caches are updated in place (passed as they are: the kernel splits slots into block and row)
    _compiled()(
        qkv.contiguous().view(tokens, HEADS, DIM),
        q_norm_weight.contiguous(),
        k_norm_weight.contiguous(),
        positions.contiguous(),
        cos_sin_cache.contiguous(),
        slot_mapping.contiguous(),
        key_cache,
        value_cache,
        out,
    )
    return out
