"""p44 grouped_routing_block_scale_deepseek_fp8 — plan `fused`, CuTe DSL: DeepSeek routing + block-FP8 grouped GEMMs.

Plan (six CuTe DSL kernels, all of the layer). (1) route: one warp per token, lane l owns experts
8l .. 8l+7 (group g = lanes 4g .. 4g+3); s = sigmoid(logit), c = s + bias; a group's score is the sum
of its two largest c (pairs merged over the group's 4 lanes with butterfly shuffles); a group is kept
when fewer than 4 groups beat it; 8 rounds of a warp argmax pick the experts of kept groups in
decreasing c; weights = s / (sum + 1e-20) * 2.5. Lane 0 records each local expert with its weight and
its rank among the expert's rows (atomicAdd on the expert's count). (2) scan (`_moe_cutedsl`):
128-row padded expert segments and the tile table. (3) scatter: each token's fp8 row (16-byte copies)
and its 56 block scales go to its expert rows. (4) GEMM1 (problems/_wgmma_cutedsl.py, persistent,
split-N tiles of 64 rows x 128 intermediate columns): TMA brings 64 rows of the packed activation and
the expert's two 128-row weight tiles (L coordinates 2e, 2e + 1 of w13 viewed as (I, H, 2E));
warpgroup 0 computes G[:, n], warpgroup 1 G[:, I + n] with m64n128k32 fp8 WGMMAs, each k-tile
promoted with s_x[t, kb] * s_w1[e, n-block, kb]; half tiles past the expert's row count run no
k-tile and store nothing. Warpgroup 1 hands G[:, I + n] over through shared memory; warpgroup 0 forms
act = silu(G[:, I + n]) * G[:, n] in float32 and re-quantises each row's 128 values as two fp8 terms,
q_hi = fp8(act / s_hi), q_lo = fp8((act - q_hi s_hi) / s_lo), s = amax / 448 of each term (the pair
carries ~2^-9 relative error, like bf16), interleaved per 128-column block. (5) GEMM2 (persistent,
128 x 128 tiles): the block-FP8 GEMM of the [hi | lo] activation against w2, k-tile kt meeting weight
block kt // 2, promoted with s_act[kt, row] * s_w2[e, n-block, kt // 2]; the epilogue scales by the
routing weight and stores bf16. (6) combine (`_moe_cutedsl`): float32 sum of each token's rows, one
bf16 rounding. Symbolic sizes: each kernel compiled once.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor

from problems import _wgmma_cutedsl as W
from problems.moe.solutions import _moe_cutedsl as M

EXPERTS = 256
LOCAL = 32
TOP_K = 8
N_GROUP = 8
TOPK_GROUP = 4
PER_LANE = EXPERTS // 32
LANES_PER_GROUP = 32 // N_GROUP
ROUTED_SCALING = 2.5
BLOCK = 128
BM1 = 64
THREADS = 256
TOKENS_PER_CTA = THREADS // 32
FP8_MAX = 448.0
TINY = 1e-30  # amax floor of an all-zero row (its codes are all 0 whatever the scale)
NEG_BIG = -3.0e38
CFG1 = W.GemmConfig(cutlass.Float8E4M3FN, BLOCK, n_b=2, split_n=True)
CFG2 = W.GemmConfig(cutlass.Float8E4M3FN, BLOCK)


@cute.kernel
def _route_kernel(
    mL: cute.Tensor, mB: cute.Tensor, offset: cutlass.Int32, mPE: cute.Tensor, mPW: cute.Tensor,
    mPS: cute.Tensor, mCNT: cute.Tensor,
):  # fmt: skip
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    tokens = cute.size(mL, mode=[0])
    tok = bidx * TOKENS_PER_CTA + tidx // 32
    lane = tidx % 32
    row = cutlass.min(tok, tokens - 1)
    s = [
        cutlass.Float32(1.0) / (cutlass.Float32(1.0) + cute.math.exp(-mL[row, lane * PER_LANE + i]))
        for i in range(PER_LANE)
    ]
    c = [s[i] + mB[lane * PER_LANE + i].to(cutlass.Float32) for i in range(PER_LANE)]
    a1 = cutlass.Float32(NEG_BIG)
    a2 = cutlass.Float32(NEG_BIG)
    for i in cutlass.range_constexpr(PER_LANE):
        a2 = cute.arch.fmax(a2, cute.arch.fmin(a1, c[i]))
        a1 = cute.arch.fmax(a1, c[i])
    # merge the (largest, second largest) pairs of the 4 lanes of a group
    for k in cutlass.range_constexpr(2):
        o1 = cute.arch.shuffle_sync_bfly(a1, offset=1 << k)
        o2 = cute.arch.shuffle_sync_bfly(a2, offset=1 << k)
        a2 = cute.arch.fmax(cute.arch.fmin(a1, o1), cute.arch.fmax(a2, o2))
        a1 = cute.arch.fmax(a1, o1)
    gscore = a1 + a2
    beaten = cutlass.Int32(0)
    for g in cutlass.range_constexpr(N_GROUP):
        other = cute.arch.shuffle_sync(gscore, g * LANES_PER_GROUP)
        if other > gscore or (other == gscore and g < lane // LANES_PER_GROUP):
            beaten = beaten + 1
    if beaten >= TOPK_GROUP:
        for i in cutlass.range_constexpr(PER_LANE):
            c[i] = cutlass.Float32(NEG_BIG)
    sel_id = []
    sel_s = []
    for _ in cutlass.range_constexpr(TOP_K):
        best = cutlass.Float32(NEG_BIG)
        best_id = cutlass.Int32(EXPERTS)
        best_s = cutlass.Float32(0.0)
        for i in cutlass.range_constexpr(PER_LANE):
            if c[i] > best:
                best = c[i]
                best_id = lane * PER_LANE + i
                best_s = s[i]
        for k in cutlass.range_constexpr(5):
            ov = cute.arch.shuffle_sync_bfly(best, offset=16 >> k)
            oi = cute.arch.shuffle_sync_bfly(best_id, offset=16 >> k)
            os = cute.arch.shuffle_sync_bfly(best_s, offset=16 >> k)
            if ov > best or (ov == best and oi < best_id):
                best = ov
                best_id = oi
                best_s = os
        sel_id.append(best_id)
        sel_s.append(best_s)
        for i in cutlass.range_constexpr(PER_LANE):
            if best_id == lane * PER_LANE + i:
                c[i] = cutlass.Float32(NEG_BIG)
    total = cutlass.Float32(0.0)
    for r in cutlass.range_constexpr(TOP_K):
        total = total + sel_s[r]
    scale = cutlass.Float32(ROUTED_SCALING) / (total + cutlass.Float32(1e-20))
    if tok < tokens and lane == 0:
        for r in cutlass.range_constexpr(TOP_K):
            e = sel_id[r] - offset
            if e >= 0 and e < LOCAL:
                mPE[tok, r] = e
                mPS[tok, r] = cute.arch.atomic_add(mCNT.iterator + e, cutlass.Int32(1))
            else:
                mPE[tok, r] = cutlass.Int32(-1)
                mPS[tok, r] = cutlass.Int32(0)
            mPW[tok, r] = sel_s[r] * scale


@cute.jit
def _route(
    mL: cute.Tensor, mB: cute.Tensor, offset: cutlass.Int32, mPE: cute.Tensor, mPW: cute.Tensor,
    mPS: cute.Tensor, mCNT: cute.Tensor,
):  # fmt: skip
    grid = (cute.size(mL, mode=[0]) + TOKENS_PER_CTA - 1) // TOKENS_PER_CTA
    _route_kernel(mL, mB, offset, mPE, mPW, mPS, mCNT).launch(grid=[grid, 1, 1], block=[THREADS, 1, 1])


@cute.kernel
def _scatter_kernel(
    mX: cute.Tensor, mXS: cute.Tensor, mPE: cute.Tensor, mPW: cute.Tensor, mPS: cute.Tensor, mOFF: cute.Tensor,
    mXP: cute.Tensor, mSP: cute.Tensor, mRW: cute.Tensor, mTR: cute.Tensor,
):  # fmt: skip
    tidx, _, _ = cute.arch.thread_idx()
    t, _, _ = cute.arch.block_idx()
    chunks = cute.size(mX, mode=[1]) // 16
    kb = cute.size(mXS, mode=[0])
    gX = cute.zipped_divide(mX, (1, 16))
    gXP = cute.zipped_divide(mXP, (1, 16))
    dst = []
    for j in cutlass.range_constexpr(TOP_K):
        e = mPE[t, j]
        dst.append(cutlass.select_(e >= 0, mOFF[cutlass.max(e, 0)] * M.BM + mPS[t, j], cutlass.Int32(-1)))
    for c in cutlass.range(tidx, chunks, THREADS, unroll=1):
        rX = cute.make_rmem_tensor((16,), cutlass.Uint8)
        cute.autovec_copy(gX[(0, None), (t, c)], rX)
        for j in cutlass.range_constexpr(TOP_K):
            if dst[j] >= 0:
                cute.autovec_copy(rX, gXP[(0, None), (dst[j], c)])
    for j in cutlass.range_constexpr(TOP_K):
        if dst[j] >= 0 and tidx < kb:
            mSP[tidx, dst[j]] = mXS[tidx, t]
        if tidx == j:
            mTR[t, j] = dst[j]
            if dst[j] >= 0:
                mRW[dst[j]] = mPW[t, j]


@cute.jit
def _scatter(
    mX: cute.Tensor, mXS: cute.Tensor, mPE: cute.Tensor, mPW: cute.Tensor, mPS: cute.Tensor, mOFF: cute.Tensor,
    mXP: cute.Tensor, mSP: cute.Tensor, mRW: cute.Tensor, mTR: cute.Tensor,
):  # fmt: skip
    _scatter_kernel(mX, mXS, mPE, mPW, mPS, mOFF, mXP, mSP, mRW, mTR).launch(
        grid=[cute.size(mX, mode=[0]), 1, 1], block=[THREADS, 1, 1]
    )


@cute.jit
def _two_term_fp8(act, halves, coords, lane_first, m_a2, m_s2, rows0, nt):
    """Each row's 128 values (a quad of lanes, 32 each) as two fp8 terms: codes into m_a2's blocks
    2nt (hi) and 2nt + 1 (lo), their scales into m_s2 (by the lane that holds column 0)."""
    n = cute.size(act)
    for term in cutlass.range_constexpr(2):
        amax = [cutlass.Float32(TINY), cutlass.Float32(TINY)]
        for i in cutlass.range_constexpr(n):
            amax[halves[i]] = cute.arch.fmax(amax[halves[i]], cute.math.absf(act[i]))
        for h in cutlass.range_constexpr(2):
            for sh in cutlass.range_constexpr(2):  # the 4 lanes of a quad hold the same rows
                amax[h] = cute.arch.fmax(amax[h], cute.arch.shuffle_sync_bfly(amax[h], offset=1 << sh))
        sc = [amax[h] / cutlass.Float32(FP8_MAX) for h in range(2)]
        y = cute.make_rmem_tensor(act.shape, cutlass.Float32)
        for i in cutlass.range_constexpr(n):
            y[i] = cute.arch.fmin(
                cute.arch.fmax(act[i] / sc[halves[i]], cutlass.Float32(-FP8_MAX)), cutlass.Float32(FP8_MAX)
            )
        q = cute.make_rmem_tensor(act.shape, cutlass.Float8E4M3FN)
        q.store(y.load().to(cutlass.Float8E4M3FN))
        qf = q.load().to(cutlass.Float32)
        for i in cutlass.range_constexpr(n):
            m_a2[rows0 + coords[i][0], (2 * nt + term) * BLOCK + coords[i][1]] = q[i]
            act[i] = act[i] - qf[i] * sc[halves[i]]
        if lane_first:
            m_s2[2 * nt + term, rows0 + coords[0][0]] = sc[halves[0]]
            m_s2[2 * nt + term, rows0 + coords[0][0] + 8] = sc[1 - halves[0]]


@cute.kernel
def _gemm1_kernel(
    tiled_mma: cute.TiledMma, a_smem: cute.ComposedLayout, b_smem: cute.ComposedLayout, tma_a: cute.CopyAtom,
    mXP: cute.Tensor, tma_b: cute.CopyAtom, mW: cute.Tensor, mSP: cute.Tensor, mOFF: cute.Tensor,
    mTILE: cute.Tensor, mCNT: cute.Tensor, mS13: cute.Tensor, mA2: cute.Tensor, mS2: cute.Tensor,
):  # fmt: skip
    tidx, _, _ = cute.arch.thread_idx()
    wg = tidx // W.WG_THREADS
    inter = cute.size(mW, mode=[0])
    n_tiles = inter // BLOCK
    blocks = mOFF[cute.size(mOFF) - 1]
    halves = W.row_halves(tiled_mma, BM1, BLOCK)

    def live_rows(mh):
        seg = mTILE[mh // 2]
        return mOFF[seg] * M.BM + mCNT[seg] - mh * BM1  # rows of the expert from this half tile on

    def tile_fn(t):
        mh, nt = W.raster(t, 2 * blocks, n_tiles)
        e = mTILE[mh // 2]
        k_tiles = cutlass.select_(live_rows(mh) > 0, cute.size(mSP, mode=[0]), cutlass.Int32(0))

        def scale(kt, row):
            return mSP[kt, mh * BM1 + row] * mS13[e, wg * n_tiles + nt, kt]

        return W.Tile((mh, 0), [(nt, 2 * e), (nt, 2 * e + 1)], k_tiles, scale)

    def epilogue(t, tile, accs, coords, xch):
        mh, nt = tile.a[0], tile.b[0][0]
        (acc,) = accs
        n = cute.size(acc)
        if live_rows(mh) > 0:
            # warpgroup 1 hands G[:, I + n] over (value-major: consecutive lanes, no bank conflicts)
            cute.arch.sync_threads()
            if wg == 1:
                for i in cutlass.range_constexpr(n):
                    xch[i * W.WG_THREADS + tidx % W.WG_THREADS] = acc[i]
            cute.arch.sync_threads()
            if wg == 0:
                for i in cutlass.range_constexpr(n):
                    g = xch[i * W.WG_THREADS + tidx]
                    acc[i] = g / (cutlass.Float32(1.0) + cute.math.exp(-g)) * acc[i]
                _two_term_fp8(acc, halves, coords, coords[0][1] == 0, mA2, mS2, mh * BM1, nt)
            cute.arch.sync_threads()  # the hand-over buffer is read before the next tile's epilogue

    W.gemm_persistent(
        CFG1, tiled_mma, a_smem, b_smem, tma_a, mXP, tma_b, mW, None, 2 * blocks * n_tiles, tile_fn, epilogue
    )


@cute.jit
def _gemm1(
    mXP: cute.Tensor, mW: cute.Tensor, mSP: cute.Tensor, mOFF: cute.Tensor, mTILE: cute.Tensor, mCNT: cute.Tensor,
    mS13: cute.Tensor, mA2: cute.Tensor, mS2: cute.Tensor,
):  # fmt: skip
    tiled_mma, a_smem, b_smem = CFG1.layouts()
    tma_a, gA = CFG1.tma_a(mXP, a_smem)
    tma_b, gB = CFG1.tma_b(mW, b_smem)
    _gemm1_kernel(tiled_mma, a_smem, b_smem, tma_a, gA, tma_b, gB, mSP, mOFF, mTILE, mCNT, mS13, mA2, mS2).launch(
        grid=[W.SMS, 1, 1], block=[W.THREADS, 1, 1]
    )


@cute.kernel
def _gemm2_kernel(
    tiled_mma: cute.TiledMma, a_smem: cute.ComposedLayout, b_smem: cute.ComposedLayout, tma_a: cute.CopyAtom,
    mA2: cute.Tensor, tma_b: cute.CopyAtom, mW: cute.Tensor, mS2: cute.Tensor, mWS2: cute.Tensor,
    mOFF: cute.Tensor, mTILE: cute.Tensor, mRW: cute.Tensor, mY: cute.Tensor,
):  # fmt: skip
    n_tiles = cute.size(mY, mode=[1]) // BLOCK
    blocks = mOFF[cute.size(mOFF) - 1]
    halves = W.row_halves(tiled_mma, M.BM, BLOCK)

    def tile_fn(t):
        mt, nt = W.raster(t, blocks, n_tiles)
        e = mTILE[mt]

        def scale(kt, row):
            return mS2[kt, mt * M.BM + row] * mWS2[e, nt, kt // 2]

        # k-tile kt of the [hi | lo] activation meets weight block kt // 2
        return W.Tile((mt, 0), [(nt, e)], cute.size(mS2, mode=[0]), scale, b_k_div=2)

    def epilogue(t, tile, accs, coords, xch):
        (acc,) = accs
        row0 = tile.a[0] * M.BM + coords[0][0]
        w0, w1 = mRW[row0], mRW[row0 + 8]
        for i in cutlass.range_constexpr(cute.size(acc)):
            acc[i] = acc[i] * (w1 if halves[i] else w0)
        out = cute.make_rmem_tensor(acc.shape, cutlass.BFloat16)
        out.store(acc.load().to(cutlass.BFloat16))
        W.store_tile(mY, out, coords, tile.a[0] * M.BM, tile.b[0][0] * BLOCK, BLOCK)

    W.gemm_persistent(CFG2, tiled_mma, a_smem, b_smem, tma_a, mA2, tma_b, mW, None, blocks * n_tiles, tile_fn, epilogue)


@cute.jit
def _gemm2(
    mA2: cute.Tensor, mW: cute.Tensor, mS2: cute.Tensor, mWS2: cute.Tensor, mOFF: cute.Tensor, mTILE: cute.Tensor,
    mRW: cute.Tensor, mY: cute.Tensor,
):  # fmt: skip
    tiled_mma, a_smem, b_smem = CFG2.layouts()
    tma_a, gA = CFG2.tma_a(mA2, a_smem)
    tma_b, gB = CFG2.tma_b(mW, b_smem)
    _gemm2_kernel(tiled_mma, a_smem, b_smem, tma_a, gA, tma_b, gB, mS2, mWS2, mOFF, mTILE, mRW, mY).launch(
        grid=[W.SMS, 1, 1], block=[W.THREADS, 1, 1]
    )


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        t, rows, maxt, segs, el = (cute.sym_int() for _ in range(5))
        h, i, i2 = (cute.sym_int(divisibility=128) for _ in range(3))  # hidden, intermediate, 2 x intermediate
        kb, nb1, nb2, ib = (cute.sym_int() for _ in range(4))  # 128-blocks of hidden, 2I, hidden, I
        bf16, f32, i32, u8, e4 = cutlass.BFloat16, cutlass.Float32, cutlass.Int32, cutlass.Uint8, cutlass.Float8E4M3FN

        def mat(dtype, shape, align=4):
            order = tuple(range(len(shape) - 1, -1, -1))  # row-major
            return make_fake_compact_tensor(dtype, shape, stride_order=order, assumed_align=align)

        def rows_k_l(shape):
            return make_fake_compact_tensor(e4, shape, stride_order=(1, 0, 2), assumed_align=16)

        def vec(dtype, n):
            return make_fake_compact_tensor(dtype, (n,), assumed_align=4)

        opts = M.OPTS
        _COMPILED.extend((
            cute.compile(
                _route, mat(f32, (t, EXPERTS), 16), vec(bf16, EXPERTS), i32(0), mat(i32, (t, TOP_K)),
                mat(f32, (t, TOP_K)), mat(i32, (t, TOP_K)), vec(i32, LOCAL), options=opts,
            ),
            M.compiled_scan(),
            cute.compile(
                _scatter, mat(u8, (t, h), 16), mat(f32, (kb, t)), mat(i32, (t, TOP_K)), mat(f32, (t, TOP_K)),
                mat(i32, (t, TOP_K)), vec(i32, segs), mat(u8, (rows, h), 16), mat(f32, (kb, rows)), vec(f32, rows),
                mat(i32, (t, TOP_K)), options=opts,
            ),
            cute.compile(
                _gemm1, rows_k_l((rows, h, 1)), rows_k_l((i, h, el)), mat(f32, (kb, rows)), vec(i32, segs),
                vec(i32, maxt), vec(i32, LOCAL), mat(f32, (LOCAL, nb1, kb)), mat(e4, (rows, i2), 16),
                mat(f32, (nb1, rows)), options=opts,
            ),
            cute.compile(
                _gemm2, rows_k_l((rows, i2, 1)), rows_k_l((h, i, el)), mat(f32, (nb1, rows)),
                mat(f32, (LOCAL, nb2, ib)), vec(i32, segs), vec(i32, maxt), vec(f32, rows), mat(bf16, (rows, h), 16),
                options=opts,
            ),
            M.compiled_combine(TOP_K),
        ))  # fmt: skip
    return _COMPILED


def run(
    routing_logits: torch.Tensor,
    routing_bias: torch.Tensor,
    hidden_states: torch.Tensor,
    hidden_states_scale: torch.Tensor,
    gemm1_weights: torch.Tensor,
    gemm1_weights_scale: torch.Tensor,
    gemm2_weights: torch.Tensor,
    gemm2_weights_scale: torch.Tensor,
    local_expert_offset: int,
    routed_scaling_factor: float,
) -> torch.Tensor:
    k_route, k_scan, k_scatter, k_gemm1, k_gemm2, k_combine = _compiled()
    tokens, hidden = hidden_states.shape
    inter = gemm2_weights.shape[2]
    tiles = M.max_tiles(tokens, LOCAL, TOP_K, 0)
    rows = tiles * M.BM
    dev = hidden_states.device
    pair_e = torch.empty((tokens, TOP_K), dtype=torch.int32, device=dev)
    pair_w = torch.empty((tokens, TOP_K), dtype=torch.float32, device=dev)
    pair_s = torch.empty((tokens, TOP_K), dtype=torch.int32, device=dev)
    counts = torch.zeros(LOCAL, dtype=torch.int32, device=dev)
    k_route(routing_logits, routing_bias, int(local_expert_offset), pair_e, pair_w, pair_s, counts)
    offsets = torch.empty(LOCAL + 1, dtype=torch.int32, device=dev)
    table = torch.empty(tiles, dtype=torch.int32, device=dev)
    k_scan(counts, offsets, table, 0)
    xp = torch.empty((rows, hidden), dtype=torch.uint8, device=dev)
    sp = torch.empty((hidden // BLOCK, rows), dtype=torch.float32, device=dev)
    row_w = torch.empty(rows, dtype=torch.float32, device=dev)
    token_rows = torch.empty((tokens, TOP_K), dtype=torch.int32, device=dev)
    k_scatter(
        hidden_states.view(torch.uint8), hidden_states_scale, pair_e, pair_w, pair_s, offsets, xp, sp, row_w, token_rows
    )
    a2 = torch.empty((rows, 2 * inter), dtype=torch.float8_e4m3fn, device=dev)
    s2 = torch.empty((2 * inter // BLOCK, rows), dtype=torch.float32, device=dev)
    # w13 as (I, H, 2E): L = 2e is G[:, :I] of expert e, L = 2e + 1 its G[:, I:]
    w13 = W.rows_k_l(gemm1_weights.view(2 * LOCAL, inter, hidden))
    k_gemm1(W.rows_k_l(xp.view(torch.float8_e4m3fn)), w13, sp, offsets, table, counts, gemm1_weights_scale, a2, s2)
    y = torch.empty((rows, hidden), dtype=torch.bfloat16, device=dev)
    k_gemm2(W.rows_k_l(a2), W.rows_k_l(gemm2_weights), s2, gemm2_weights_scale, offsets, table, row_w, y)
    out = torch.empty((tokens, hidden), dtype=torch.bfloat16, device=dev)
    k_combine(y, token_rows, out)
    return out
