"""Grouped-GEMM mixture-of-experts pipeline in CuTe DSL, shared by the bf16 moe reference kernels (DESIGN §5).

After a problem's route kernel has written, per (token, slot), the local expert (or -1), its weight
and its rank among the expert's rows (an atomicAdd on the expert's count), five kernels finish the
layer on tensor cores:

1. scan (one CTA): every segment (local experts, then `nv` shared-expert segments of all T tokens) is
   padded to whole 128-row tiles; block offsets and the table tile -> segment (-1 past the end).
2. scatter (one CTA per token): the token's hidden row goes to its rows of the packed activation Xp
   (16-byte vectors), with each row's combine weight (routing weight; 1 or the shared gate for
   shared rows); `token_rows` remembers where they went.
3. GEMM1: per 128-row tile of Xp and 128 intermediate columns, two warpgroups of m64n128 bf16 WGMMAs
   against the expert's gate tile and its up tile (problems/_wgmma_cutedsl.py `mainloop`, TMA through
   a 4-deep mbarrier ring; the weights are viewed as (intermediate, hidden, 2 x experts) so gate and
   up are L coordinates 2e and 2e + 1); the epilogue forms silu(gate) * up in float32, bf16 into Act.
4. GEMM2: per 128-row tile of Act and 256 hidden columns, m64n256 WGMMAs against the tile's expert's
   down projection, scaled by each row's weight in the epilogue, bf16 into Y.
5. combine (one CTA per token): out[t] = sum of the Y rows of t, float32, one bf16 rounding.

Shared experts are segments like the routed ones: the GEMMs take a second TMA source, the shared
weights viewed the same way (virtual expert s = intermediate columns [s I, (s + 1) I)), chosen per
tile, so both GEMMs are single launches over every tile. The GEMMs are persistent (one CTA per SM
walks the tiles the scan produced, so no CTA is launched for the table's unused tail); tiles are
rastered 8 m-tiles at a time across N so a weight tile is reused from L2. TMA zero-fills weight rows
past the end of a short N; those columns are not stored.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_tensor

from problems import _wgmma_cutedsl as W

BM = W.BM
GU = 128  # intermediate columns per GEMM1 tile (gate tile + up tile)
BN2 = 256  # hidden columns per GEMM2 tile
VEC = 8  # bf16 per 16-byte access
THREADS = 256
MAX_SEGMENTS = 128
CFG1 = W.GemmConfig(cutlass.BFloat16, GU, n_b=2)
CFG2 = W.GemmConfig(cutlass.BFloat16, BN2)


def max_tiles(tokens: int, local: int, top_k: int, shared: int) -> int:
    """Upper bound of 128-row tiles: every pair local, every expert segment ending in a partial tile."""
    return (tokens * min(top_k, local) + BM - 1) // BM + local + shared * ((tokens + BM - 1) // BM)


@cute.kernel
def _scan_kernel(mCNT: cute.Tensor, mOFF: cute.Tensor, mTILE: cute.Tensor, shared_blocks: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    local = cute.size(mCNT)
    segs = cute.size(mOFF) - 1
    maxt = cute.size(mTILE)
    soff = cutlass.utils.SmemAllocator().allocate_tensor(
        cutlass.Int32, cute.make_layout((MAX_SEGMENTS + 1,)), 16
    )
    if tidx == 0:
        run = cutlass.Int32(0)
        for e in cutlass.range(segs, unroll=1):
            soff[e] = run
            mOFF[e] = run
            blocks = shared_blocks
            if e < local:
                blocks = (mCNT[e] + BM - 1) // BM
            run = run + blocks
        soff[segs] = run
        mOFF[segs] = run
    cute.arch.sync_threads()
    for blk in cutlass.range(tidx, maxt, THREADS, unroll=1):
        seg = cutlass.Int32(-1)
        for e in cutlass.range(segs, unroll=1):
            if soff[e] <= blk and blk < soff[e + 1]:
                seg = e
        mTILE[blk] = seg


@cute.jit
def _scan(mCNT: cute.Tensor, mOFF: cute.Tensor, mTILE: cute.Tensor, shared_blocks: cutlass.Int32):
    _scan_kernel(mCNT, mOFF, mTILE, shared_blocks).launch(grid=[1, 1, 1], block=[THREADS, 1, 1])


def _scatter_fn(top_k: int, nv: int):
    slots = top_k + nv

    @cute.kernel
    def scatter_kernel(
        mX: cute.Tensor,
        mPE: cute.Tensor,
        mPW: cute.Tensor,
        mPS: cute.Tensor,
        mSG: cute.Tensor,
        mOFF: cute.Tensor,
        mXP: cute.Tensor,
        mRW: cute.Tensor,
        mTR: cute.Tensor,
    ):
        tidx, _, _ = cute.arch.thread_idx()
        t, _, _ = cute.arch.block_idx()
        local = cute.size(mOFF) - 1 - nv
        chunks = cute.size(mX, mode=[1]) // VEC
        gX = cute.zipped_divide(mX, (1, VEC))  # ((1, VEC), (T, chunks))
        gXP = cute.zipped_divide(mXP, (1, VEC))
        dst = []
        for j in cutlass.range_constexpr(top_k):
            e = mPE[t, j]
            dst.append(cutlass.select_(e >= 0, mOFF[cutlass.max(e, 0)] * BM + mPS[t, j], cutlass.Int32(-1)))
        for j in cutlass.range_constexpr(nv):
            dst.append(mOFF[local + j] * BM + t)
        for c in cutlass.range(tidx, chunks, THREADS, unroll=1):
            rX = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
            cute.autovec_copy(gX[(0, None), (t, c)], rX)
            for j in cutlass.range_constexpr(slots):
                if dst[j] >= 0:
                    cute.autovec_copy(rX, gXP[(0, None), (dst[j], c)])
        for j in cutlass.range_constexpr(slots):
            if tidx == j:
                mTR[t, j] = dst[j]
                if dst[j] >= 0:
                    if cutlass.const_expr(j < top_k):
                        mRW[dst[j]] = mPW[t, j]
                    else:
                        mRW[dst[j]] = mSG[t]

    @cute.jit
    def scatter(
        mX: cute.Tensor,
        mPE: cute.Tensor,
        mPW: cute.Tensor,
        mPS: cute.Tensor,
        mSG: cute.Tensor,
        mOFF: cute.Tensor,
        mXP: cute.Tensor,
        mRW: cute.Tensor,
        mTR: cute.Tensor,
    ):
        tokens = cute.size(mX, mode=[0])
        scatter_kernel(mX, mPE, mPW, mPS, mSG, mOFF, mXP, mRW, mTR).launch(
            grid=[tokens, 1, 1], block=[THREADS, 1, 1]
        )

    return scatter


def _silu_mul(g, u):
    return g / (cutlass.Float32(1.0) + cute.math.exp(-g)) * u


@cute.kernel
def _gemm1_kernel(
    tiled_mma: cute.TiledMma,
    a_smem: cute.ComposedLayout,
    b_smem: cute.ComposedLayout,
    tma_a: cute.CopyAtom,
    mXP: cute.Tensor,
    tma_b: cute.CopyAtom,
    mW: cute.Tensor,
    tma_s: cute.CopyAtom,
    mSW: cute.Tensor,
    mOFF: cute.Tensor,
    mTILE: cute.Tensor,
    mACT: cute.Tensor,
):
    inter = cute.size(mACT, mode=[1])
    local = cute.size(mW, mode=[2]) // 2
    nv = cute.size(mSW, mode=[2]) // 2
    n_tiles = (inter + GU - 1) // GU
    blocks = mOFF[cute.size(mOFF) - 1]

    def tile_fn(t):
        mt, nt = W.raster(t, blocks, n_tiles)
        seg = mTILE[mt]
        e = cutlass.min(seg, local - 1)
        s = cutlass.max(seg - local, 0)
        k_tiles = cute.size(mXP, mode=[1]) // CFG1.bk
        return W.Tile(
            (mt, 0), [(nt, 2 * e), (nt, 2 * e + 1)], k_tiles, None, [(nt, s), (nt, nv + s)], seg >= local
        )

    def epilogue(t, tile, accs, coords, xch):
        gate, up = accs
        for i in cutlass.range_constexpr(cute.size(gate)):
            gate[i] = _silu_mul(gate[i], up[i])
        out = cute.make_rmem_tensor(gate.shape, cutlass.BFloat16)
        out.store(gate.load().to(cutlass.BFloat16))
        W.store_tile(mACT, out, coords, tile.a[0] * BM, tile.b[0][0] * GU, GU)

    W.gemm_persistent(
        CFG1,
        tiled_mma,
        a_smem,
        b_smem,
        tma_a,
        mXP,
        tma_b,
        mW,
        (tma_s, mSW),
        blocks * n_tiles,
        tile_fn,
        epilogue,
    )


@cute.jit
def _gemm1(
    mXP: cute.Tensor,
    mW: cute.Tensor,
    mSW: cute.Tensor,
    mOFF: cute.Tensor,
    mTILE: cute.Tensor,
    mACT: cute.Tensor,
):
    tiled_mma, a_smem, b_smem = CFG1.layouts()
    tma_a, gA = CFG1.tma_a(mXP, a_smem)
    tma_b, gB = CFG1.tma_b(mW, b_smem)
    tma_s, gS = CFG1.tma_b(mSW, b_smem)
    _gemm1_kernel(tiled_mma, a_smem, b_smem, tma_a, gA, tma_b, gB, tma_s, gS, mOFF, mTILE, mACT).launch(
        grid=[W.SMS, 1, 1], block=[W.THREADS, 1, 1]
    )


@cute.kernel
def _gemm2_kernel(
    tiled_mma: cute.TiledMma,
    a_smem: cute.ComposedLayout,
    b_smem: cute.ComposedLayout,
    tma_a: cute.CopyAtom,
    mACT: cute.Tensor,
    tma_b: cute.CopyAtom,
    mW: cute.Tensor,
    tma_s: cute.CopyAtom,
    mSW: cute.Tensor,
    mOFF: cute.Tensor,
    mTILE: cute.Tensor,
    mRW: cute.Tensor,
    mY: cute.Tensor,
):
    hidden = cute.size(mY, mode=[1])
    local = cute.size(mW, mode=[2])
    n_tiles = (hidden + BN2 - 1) // BN2
    blocks = mOFF[cute.size(mOFF) - 1]
    halves = W.row_halves(tiled_mma, BM, BN2)

    def tile_fn(t):
        mt, nt = W.raster(t, blocks, n_tiles)
        seg = mTILE[mt]
        e = cutlass.min(seg, local - 1)
        s = cutlass.max(seg - local, 0)
        k_tiles = cute.size(mACT, mode=[1]) // CFG2.bk
        return W.Tile((mt, 0), [(nt, e)], k_tiles, None, [(nt, s)], seg >= local)

    def epilogue(t, tile, accs, coords, xch):
        (acc,) = accs
        row0 = tile.a[0] * BM + coords[0][0]
        w0, w1 = mRW[row0], mRW[row0 + 8]
        for i in cutlass.range_constexpr(cute.size(acc)):
            acc[i] = acc[i] * (w1 if halves[i] else w0)
        out = cute.make_rmem_tensor(acc.shape, cutlass.BFloat16)
        out.store(acc.load().to(cutlass.BFloat16))
        W.store_tile(mY, out, coords, tile.a[0] * BM, tile.b[0][0] * BN2, BN2)

    W.gemm_persistent(
        CFG2,
        tiled_mma,
        a_smem,
        b_smem,
        tma_a,
        mACT,
        tma_b,
        mW,
        (tma_s, mSW),
        blocks * n_tiles,
        tile_fn,
        epilogue,
    )


@cute.jit
def _gemm2(
    mACT: cute.Tensor,
    mW: cute.Tensor,
    mSW: cute.Tensor,
    mOFF: cute.Tensor,
    mTILE: cute.Tensor,
    mRW: cute.Tensor,
    mY: cute.Tensor,
):
    tiled_mma, a_smem, b_smem = CFG2.layouts()
    tma_a, gA = CFG2.tma_a(mACT, a_smem)
    tma_b, gB = CFG2.tma_b(mW, b_smem)
    tma_s, gS = CFG2.tma_b(mSW, b_smem)
    _gemm2_kernel(tiled_mma, a_smem, b_smem, tma_a, gA, tma_b, gB, tma_s, gS, mOFF, mTILE, mRW, mY).launch(
        grid=[W.SMS, 1, 1], block=[W.THREADS, 1, 1]
    )


@cute.kernel
def _combine_kernel(mY: cute.Tensor, mTR: cute.Tensor, mOut: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    t, _, _ = cute.arch.block_idx()
    chunks = cute.size(mOut, mode=[1]) // VEC
    slots = cute.size(mTR, mode=[1])
    gY = cute.zipped_divide(mY, (1, VEC))
    gO = cute.zipped_divide(mOut, (1, VEC))
    for c in cutlass.range(tidx, chunks, THREADS, unroll=1):
        acc = cute.make_rmem_tensor((VEC,), cutlass.Float32)
        acc.fill(0.0)
        for j in cutlass.range(slots, unroll=1):
            r = mTR[t, j]
            if r >= 0:
                rY = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
                cute.autovec_copy(gY[(0, None), (r, c)], rY)
                acc.store(acc.load() + rY.load().to(cutlass.Float32))
        rO = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
        rO.store(acc.load().to(cutlass.BFloat16))
        cute.autovec_copy(rO, gO[(0, None), (t, c)])


@cute.jit
def _combine(mY: cute.Tensor, mTR: cute.Tensor, mOut: cute.Tensor):
    _combine_kernel(mY, mTR, mOut).launch(grid=[cute.size(mOut, mode=[0]), 1, 1], block=[THREADS, 1, 1])


_COMPILED: dict[object, object] = {}
OPTS = "--enable-tvm-ffi"


def _mat(dtype, shape, align=16):
    return make_fake_compact_tensor(dtype, shape, stride_order=(1, 0), assumed_align=align)


def _vec(dtype, n):
    return make_fake_compact_tensor(dtype, (n,), assumed_align=4)


def compiled_scan():
    """The scan kernel (sizes symbolic): (counts, offsets, tile table, blocks of a shared segment)."""
    if "scan" not in _COMPILED:
        el, segs, maxt = (cute.sym_int() for _ in range(3))
        i32 = cutlass.Int32
        _COMPILED["scan"] = cute.compile(
            _scan, _vec(i32, el), _vec(i32, segs), _vec(i32, maxt), i32(0), options=OPTS
        )
    return _COMPILED["scan"]


def compiled_combine(slots: int):
    """The combine kernel for `slots` rows per token (sizes symbolic)."""
    if ("combine", slots) not in _COMPILED:
        t, rows, h = cute.sym_int(), cute.sym_int(), cute.sym_int(divisibility=64)
        bf16 = cutlass.BFloat16
        _COMPILED[("combine", slots)] = cute.compile(
            _combine,
            _mat(bf16, (rows, h)),
            _mat(cutlass.Int32, (t, slots), 4),
            _mat(bf16, (t, h)),
            options=OPTS,
        )
    return _COMPILED[("combine", slots)]


def compiled(top_k: int, nv: int) -> tuple:
    """(scan, scatter, GEMM1, GEMM2, combine) for top-k routing and nv shared segments (sizes symbolic)."""
    if (top_k, nv) not in _COMPILED:
        t, rows, maxt, el, ev, segs = (cute.sym_int() for _ in range(6))
        h, i = cute.sym_int(divisibility=64), cute.sym_int(divisibility=64)  # whole k-tiles of 64
        bf16, i32, f32 = cutlass.BFloat16, cutlass.Int32, cutlass.Float32

        def rows_k_l(shape):  # (rows, K, L): K contiguous, then rows, then L
            return make_fake_compact_tensor(bf16, shape, stride_order=(1, 0, 2), assumed_align=16)

        i_s, h_s = (
            cute.sym_int(divisibility=64),
            cute.sym_int(divisibility=64),
        )  # shared down-projection strides
        _COMPILED[(top_k, nv)] = (
            compiled_scan(),
            cute.compile(
                _scatter_fn(top_k, nv),
                _mat(bf16, (t, h)),
                _mat(i32, (t, top_k), 4),
                _mat(f32, (t, top_k), 4),
                _mat(i32, (t, top_k), 4),
                _vec(f32, t),
                _vec(i32, segs),
                _mat(bf16, (rows, h)),
                _vec(f32, rows),
                _mat(i32, (t, top_k + nv), 4),
                options=OPTS,
            ),
            cute.compile(
                _gemm1,
                rows_k_l((rows, h, 1)),
                rows_k_l((i, h, el)),
                rows_k_l((i, h, ev)),
                _vec(i32, segs),
                _vec(i32, maxt),
                _mat(bf16, (rows, i)),
                options=OPTS,
            ),
            cute.compile(
                _gemm2,
                rows_k_l((rows, i, 1)),
                rows_k_l((h, i, el)),
                make_fake_tensor(bf16, (h, i, ev), (i_s, 1, h_s), assumed_align=16),
                _vec(i32, segs),
                _vec(i32, maxt),
                _vec(f32, rows),
                _mat(bf16, (rows, h)),
                options=OPTS,
            ),
            compiled_combine(top_k + nv),
        )
    return _COMPILED[(top_k, nv)]


def run_pipeline(
    top_k: int,
    x: torch.Tensor,
    pair_expert: torch.Tensor,
    pair_weight: torch.Tensor,
    pair_slot: torch.Tensor,
    counts: torch.Tensor,
    shared_gate: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    shared_w13: torch.Tensor,
    shared_w2: torch.Tensor,
) -> torch.Tensor:
    """The five kernels after routing; returns out [T, hidden] bf16."""
    tokens, hidden = x.shape
    local, inter = w2.shape[0], w2.shape[2]
    nv = shared_w13.shape[0] // w13.shape[1]
    k_scan, k_scatter, k_gemm1, k_gemm2, k_combine = compiled(top_k, nv)
    tiles = max_tiles(tokens, local, top_k, nv)
    dev = x.device
    offsets = torch.empty(local + nv + 1, dtype=torch.int32, device=dev)
    table = torch.empty(tiles, dtype=torch.int32, device=dev)
    k_scan(counts, offsets, table, (tokens + BM - 1) // BM)
    xp = torch.empty((tiles * BM, hidden), dtype=torch.bfloat16, device=dev)
    row_w = torch.empty(tiles * BM, dtype=torch.float32, device=dev)
    token_rows = torch.empty((tokens, top_k + nv), dtype=torch.int32, device=dev)
    k_scatter(x, pair_expert, pair_weight, pair_slot, shared_gate, offsets, xp, row_w, token_rows)
    act = torch.empty((tiles * BM, inter), dtype=torch.bfloat16, device=dev)
    # weights as (intermediate, hidden, 2 x experts): gate of expert e = L 2e, up = L 2e + 1; the shared
    # gate/up of segment s = L s / nv + s
    gate_up = W.rows_k_l(w13.view(2 * local, inter, hidden))
    shared_gate_up = W.rows_k_l(shared_w13.view(2 * nv, inter, hidden))
    k_gemm1(W.rows_k_l(xp), gate_up, shared_gate_up, offsets, table, act)
    y = torch.empty((tiles * BM, hidden), dtype=torch.bfloat16, device=dev)
    # down projections as (hidden, intermediate, experts); shared segment s = columns [s I, (s + 1) I)
    k_gemm2(
        W.rows_k_l(act),
        W.rows_k_l(w2),
        shared_w2.view(hidden, nv, inter).permute(0, 2, 1),
        offsets,
        table,
        row_w,
        y,
    )
    out = torch.empty((tokens, hidden), dtype=torch.bfloat16, device=dev)
    k_combine(y, token_rows, out)
    return out
