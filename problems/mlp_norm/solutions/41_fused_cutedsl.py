"""p41 qkv_per_head_rmsnorm_gemma3n_e4b_audio — plan `fused`, CuTe DSL: one launch normalises q, k and v.

Plan: the three tensors are viewed as [rows, 192] float32 (rows = batch·seq·8 heads). A half-warp owns
one head row of 192 floats = 48 16-byte vectors: lane l (0..15) loads vectors l, l+16 and l+32, so each
of the three loads is one fully coalesced 256-byte half-warp access, and stores its 12 outputs the same
way. The float32 sum of squares is reduced over the 16 lanes with butterfly shuffles (no shared memory,
no barrier); 1/sqrt(mean + 1e-6) is computed with IEEE division and square root (float32 output, so the
error budget is a few ulp), then y = (x · inv) · w (q, k) or x · inv (v, the weight branch is removed
at compile time). A CTA of 256 threads covers 16 rows; grid = (ceil(rows/16), 3): blockIdx.y picks q, k
or v, so the single launch streams all six tensors once (the weights stay in L1/L2). The row count is
symbolic: one compilation, cached at module level, called with torch tensors through TVM FFI.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor

HEAD_DIM = 192
VEC = 4  # float32 per 16-byte access
LANES = 16  # threads per head row
NV = HEAD_DIM // (VEC * LANES)  # 3 vectors per thread
THREADS = 256
ROWS_PER_CTA = THREADS // LANES
EPS = 1e-6


@cute.jit
def _norm_rows(
    mX: cute.Tensor,
    mW: cute.Tensor,
    mY: cute.Tensor,
    row: cutlass.Int32,
    lane: cutlass.Int32,
    has_weight: cutlass.Constexpr,
):
    rows = cute.size(mX, mode=[0])
    # ((1, VEC), (rows, 48)): one 16-byte vector per (row, vector index)
    gX = cute.zipped_divide(mX, (1, VEC))
    gY = cute.zipped_divide(mY, (1, VEC))
    gW = cute.zipped_divide(mW, (VEC,))
    # register tile (VEC, NV), column j = vector lane + 16·j of the row
    rX = cute.make_rmem_tensor((VEC, NV), cutlass.Float32)
    rX.fill(0.0)
    if row < rows:
        for j in cutlass.range_constexpr(NV):
            cute.autovec_copy(gX[(0, None), (row, lane + LANES * j)], rX[None, j])
    x = rX.load()
    ss = (x * x).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), reduction_profile=0)
    # every lane of the warp shuffles (the guard only zeroed data), so full-mask shuffles are safe
    for i in cutlass.range_constexpr(4):
        ss = ss + cute.arch.shuffle_sync_bfly(ss, offset=LANES >> (i + 1))
    inv = cutlass.Float32(1.0) / cute.math.sqrt(ss / cutlass.Float32(HEAD_DIM) + cutlass.Float32(EPS))
    rY = cute.make_rmem_tensor((VEC, NV), cutlass.Float32)
    if cutlass.const_expr(has_weight):
        rW = cute.make_rmem_tensor((VEC, NV), cutlass.Float32)
        for j in cutlass.range_constexpr(NV):
            cute.autovec_copy(gW[(None,), (lane + LANES * j,)], rW[None, j])
        rY.store((x * inv) * rW.load())
    else:
        rY.store(x * inv)
    if row < rows:
        for j in cutlass.range_constexpr(NV):
            cute.autovec_copy(rY[None, j], gY[(0, None), (row, lane + LANES * j)])


@cute.kernel
def _qkv_norm_kernel(
    mQ: cute.Tensor,
    mK: cute.Tensor,
    mV: cute.Tensor,
    mWq: cute.Tensor,
    mWk: cute.Tensor,
    mQo: cute.Tensor,
    mKo: cute.Tensor,
    mVo: cute.Tensor,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, which, _ = cute.arch.block_idx()
    row = bidx * ROWS_PER_CTA + tidx // LANES
    lane = tidx % LANES
    # blockIdx.y is uniform over the CTA: each branch is taken by whole warps
    if which == 0:
        _norm_rows(mQ, mWq, mQo, row, lane, True)
    if which == 1:
        _norm_rows(mK, mWk, mKo, row, lane, True)
    if which == 2:
        _norm_rows(mV, mWq, mVo, row, lane, False)


@cute.jit
def _qkv_norm(
    mQ: cute.Tensor,
    mK: cute.Tensor,
    mV: cute.Tensor,
    mWq: cute.Tensor,
    mWk: cute.Tensor,
    mQo: cute.Tensor,
    mKo: cute.Tensor,
    mVo: cute.Tensor,
):
    rows = cute.size(mQ, mode=[0])
    _qkv_norm_kernel(mQ, mK, mV, mWq, mWk, mQo, mKo, mVo).launch(
        grid=[(rows + ROWS_PER_CTA - 1) // ROWS_PER_CTA, 3, 1], block=[THREADS, 1, 1]
    )


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        rows = cute.sym_int()

        def mat():
            return make_fake_compact_tensor(cutlass.Float32, (rows, HEAD_DIM), stride_order=(1, 0), assumed_align=16)

        w = make_fake_compact_tensor(cutlass.Float32, (HEAD_DIM,), assumed_align=16)
        _COMPILED.append(
            cute.compile(_qkv_norm, mat(), mat(), mat(), w, w, mat(), mat(), mat(), options="--enable-tvm-ffi")
        )
    return _COMPILED[0]


def run(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    kernel = _compiled()
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
