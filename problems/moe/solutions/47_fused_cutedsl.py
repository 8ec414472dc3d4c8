"""p47 correction_bias_shared_expert_ernie_bf16 — plan `fused`, CuTe DSL: route kernel + grouped-GEMM pipeline.

Plan: (1) route: one warp per token, lane l owns experts l and l + 32 of the 64; float32 softmax
(warp max, exp, warp sum), then 6 rounds of a warp argmax on p + bias (ties to the lower id) pick the
experts; weights = p / max(sum of the 6 p, 1e-12). Lane 0 records each chosen expert that is local
(global id - offset in [0, 32)) with its weight and its rank among the expert's rows (atomicAdd on the
expert's count), -1 otherwise. (2) The grouped-GEMM pipeline of `_moe_cutedsl.py`: scan -> scatter of
the hidden rows into 128-row expert tiles (the shared MLP of intermediate 3072 is two segments of 1536
over all tokens, weight 1) -> GEMM1 (m64n128 bf16 WGMMAs on the gate and up tiles, TMA, SwiGLU in the
epilogue) -> GEMM2 (m64n256 WGMMAs, row weight in the epilogue) -> combine (float32 sum of the token's
rows, one bf16 rounding). Symbolic sizes: each kernel compiled once.
"""

from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils.hopper_helpers as sm90_utils
import torch
from cutlass.cute.nvgpu import cpasync, warpgroup
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_tensor
from cutlass.pipeline import pipeline_init_arrive, pipeline_init_wait
from cutlass.tensor_utils import LayoutEnum

# bundle: problems/_wgmma_cutedsl.py as W
# bundle: problems/moe/solutions/_moe_cutedsl.py as M

# ---- bundled shared kernel code (python -m problems._bundle; edit the source modules) ----

# problems/_wgmma_cutedsl.py
_W_BM = 128
_W_THREADS = 256
_W_WG_THREADS = 128
_W_K_STEPS = 4  # WGMMA K-steps per k-tile
_W_SMEM_BUDGET = 200 * 1024  # shared memory for the operand ring (H200: 227 KiB per CTA)
_W_SMS = 132  # H200 streaming multiprocessors: one persistent CTA each


class _W_GemmConfig:
    """Compile-time shape of one tensor-core GEMM: operand dtype, BN, number of B tiles, ring depth.

    The MMA and shared-memory layouts are IR: `layouts()` builds them inside a @cute.jit function, and
    the kernel receives them as arguments (as in CUTLASS's examples).
    """

    def __init__(self, ab_dtype: type[cutlass.Numeric], bn: int, n_b: int = 1, *, split_n: bool = False) -> None:
        if split_n and n_b != 2:
            raise ValueError("split_n pairs one B tile with each warpgroup: n_b must be 2")
        self.ab_dtype = ab_dtype
        self.bn = bn
        self.n_b = n_b
        self.split_n = split_n
        self.bm = _W_BM // 2 if split_n else _W_BM
        self.bk = _W_K_STEPS * 256 // ab_dtype.width  # WGMMA K-step: 32 bytes of K
        self.tx_bytes = (self.bm + n_b * bn) * self.bk * ab_dtype.width // 8
        self.xch_elems = _W_WG_THREADS * bn // 2 if split_n else 0  # one warpgroup's fp32 accumulators
        self.stages = (_W_SMEM_BUDGET - 4 * self.xch_elems) // self.tx_bytes
        self.tile_mnk = (self.bm, bn, self.bk)

    def layouts(self) -> tuple[Any, Any, Any]:
        """(tiled MMA, staged A smem layout, staged B smem layout); call inside @cute.jit."""
        tiled_mma = sm90_utils.make_trivial_tiled_mma(
            self.ab_dtype,
            self.ab_dtype,
            cute.nvgpu.OperandMajorMode.K,
            cute.nvgpu.OperandMajorMode.K,
            cutlass.Float32,
            (1, 1, 1) if self.split_n else (2, 1, 1),
            tiler_mn=(64, self.bn),
        )
        a_smem = sm90_utils.make_smem_layout_a(LayoutEnum.ROW_MAJOR, self.tile_mnk, self.ab_dtype, self.stages)
        b_smem = sm90_utils.make_smem_layout_b(LayoutEnum.ROW_MAJOR, self.tile_mnk, self.ab_dtype, self.stages)
        return tiled_mma, a_smem, b_smem

    def tma_a(self, tensor: cute.Tensor, a_smem: Any) -> tuple[Any, cute.Tensor]:
        """TMA load atom and coordinate tensor for A [rows, K, L] (K-major)."""
        smem = cute.slice_(a_smem, (None, None, 0))
        return cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), tensor, smem, (self.bm, self.bk))

    def tma_b(self, tensor: cute.Tensor, b_smem: Any) -> tuple[Any, cute.Tensor]:
        """TMA load atom and coordinate tensor for B [rows, K, L] (K-major), BN-row tiles."""
        smem = cute.slice_(b_smem, (None, None, 0))
        return cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), tensor, smem, (self.bn, self.bk))

    def storage(self, a_smem: Any, b_smem: Any) -> Any:
        """The shared-memory struct: ring mbarriers, the A ring, n_b B rings (1024-byte aligned), the
        hand-over buffer of split_n tiles."""
        stages, dtype = self.stages, self.ab_dtype
        a_cosize, b_cosize = cute.cosize(a_smem), cute.cosize(b_smem) * self.n_b
        xch_size = max(self.xch_elems, 1)

        @cute.struct
        class Storage:
            barriers: cute.struct.MemRange[cutlass.Int64, stages * 2]
            sA: cute.struct.Align[cute.struct.MemRange[dtype, a_cosize], 1024]
            sB: cute.struct.Align[cute.struct.MemRange[dtype, b_cosize], 1024]
            xch: cute.struct.Align[cute.struct.MemRange[cutlass.Float32, xch_size], 16]

        return Storage


class _W_Tile:
    """What `tile_fn(t)` says about tile t: coordinates (tile index, L index) of A and of each B tile,
    the k-tile count, the optional second B source's coordinates and its CTA-uniform selector, the
    block-scale factor `scale(kt, row)` of fp8 k-tiles (row in the tile; None: no scales), and
    `b_k_div`: k-tile kt of A meets k-tile kt // b_k_div of B (an A with several terms per B block).

    A plain class: a dataclass would generate its methods with exec(), which the verifier refuses in a
    submission."""

    def __init__(
        self,
        a: tuple[Any, Any],
        b: Sequence[tuple[Any, Any]],
        k_tiles: Any,
        scale: Callable[[Any, Any], Any] | None = None,
        alt: Sequence[tuple[Any, Any]] = (),
        use_alt: Any = False,
        b_k_div: int = 1,
    ) -> None:
        self.a, self.b, self.k_tiles, self.scale = a, b, k_tiles, scale
        self.alt, self.use_alt, self.b_k_div = alt, use_alt, b_k_div


@cute.jit
def _W_gemm_persistent(
    cfg: _W_GemmConfig,
    tiled_mma: Any,
    a_smem: Any,
    b_smem: Any,
    tma_a: Any,
    m_a: cute.Tensor,
    tma_b: Any,
    m_b: cute.Tensor,
    b_alt: tuple[Any, cute.Tensor] | None,
    num_tiles: Any,
    tile_fn: Callable[[Any], _W_Tile],
    epilogue: Callable[..., None],
) -> None:
    """Persistent tile loop (call from a @cute.kernel launched with THREADS threads, up to SMS CTAs).

    `epilogue(t, tile, accs, coords, xch)` stores tile t: accs = one accumulator per B tile (split_n:
    the warpgroup's own), coords = their (row, column) in the tile, xch = the split_n hand-over buffer.
    """
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    grid, _, _ = cute.arch.grid_dim()
    warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
    if warp_idx == 0:
        cpasync.prefetch_descriptor(tma_a)
        cpasync.prefetch_descriptor(tma_b)
        if cutlass.const_expr(b_alt is not None):
            cpasync.prefetch_descriptor(b_alt[0])

    storage = cutlass.utils.SmemAllocator().allocate(cfg.storage(a_smem, b_smem))
    ring = pipeline.PipelineTmaAsync.create(
        barrier_storage=storage.barriers.data_ptr(),
        num_stages=cfg.stages,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, _W_THREADS // 32),
        tx_count=cfg.tx_bytes,
        cta_layout_vmnk=cute.make_layout((1, 1, 1, 1)),
        defer_sync=True,
    )
    pipeline_init_arrive(cluster_shape_mn=(1, 1), is_relaxed=True)

    sA = storage.sA.get_tensor(a_smem.outer, swizzle=a_smem.inner)
    b_elems = cute.cosize(b_smem)

    def b_ring(i: Any) -> cute.Tensor:
        ptr = cute.recast_ptr(storage.sB.data_ptr() + i * b_elems, b_smem.inner, dtype=cfg.ab_dtype)
        return cute.make_tensor(ptr, b_smem.outer)

    sBs = [b_ring(i) for i in range(cfg.n_b)]
    xch = storage.xch.get_tensor(cute.make_layout((max(cfg.xch_elems, 1),)))
    wg = cute.arch.make_warp_uniform(tidx // _W_WG_THREADS)
    # the shared-memory operands are partitioned per warpgroup (every thread of a warpgroup sees its
    # whole A and B tiles); the accumulators per thread (`accumulator_coords`)
    if cutlass.const_expr(cfg.split_n):
        thr_mma = tiled_mma.get_slice(0)
        tCrBs = [tiled_mma.make_fragment_B(thr_mma.partition_B(b_ring(wg)))]
    else:
        thr_mma = tiled_mma.get_slice(cute.make_layout(2, stride=_W_WG_THREADS)(wg))
        tCrBs = [tiled_mma.make_fragment_B(thr_mma.partition_B(sB)) for sB in sBs]
    tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA))
    coords = _W_accumulator_coords(tiled_mma, tidx, cfg.bm, cfg.bn)
    accs = [cute.make_rmem_tensor(coords.shape, cutlass.Float32) for _ in tCrBs]
    tmps = [cute.make_rmem_tensor(coords.shape, cutlass.Float32) for _ in tCrBs]
    half = _W_row_halves(tiled_mma, cfg.bm, cfg.bn)
    row0 = coords[0][0]
    num_k_blocks = cute.size(tCrA, mode=[2])

    pipeline_init_wait(cluster_shape_mn=(1, 1))
    prod = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, cfg.stages)
    read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, cfg.stages)
    release = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, cfg.stages)

    t = bidx
    while t < num_tiles:
        tile = tile_fn(t)
        scaled = tile.scale is not None
        gA = cute.local_tile(m_a, cfg.tile_mnk, (tile.a[0], 0, None, tile.a[1]), proj=(1, None, 1))
        tAsA, tAgA = cpasync.tma_partition(
            tma_a, 0, cute.make_layout(1), cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2)
        )
        tBs = [_W__b_part(cfg, tma_b, m_b, sB, c) for sB, c in zip(sBs, tile.b, strict=True)]
        tBs_alt = []
        if cutlass.const_expr(b_alt is not None):
            tBs_alt = [_W__b_part(cfg, b_alt[0], b_alt[1], sB, c) for sB, c in zip(sBs, tile.alt, strict=True)]
        k_tiles = tile.k_tiles
        prod.reset_count()
        if warp_idx == 0:
            for _ in cutlass.range(cutlass.min(cfg.stages, k_tiles), unroll=1):
                _W__produce(ring, prod, tma_a, tAgA, tAsA, tma_b, tBs, b_alt, tBs_alt, tile.use_alt, tile.b_k_div)
                prod.advance()
        for acc in accs:
            acc.fill(0.0)
        dest = tmps if scaled else accs
        scale = tile.scale
        tiled_mma.set(warpgroup.Field.ACCUMULATE, False)
        for kt in cutlass.range(k_tiles, unroll=1):
            ring.consumer_wait(read)
            if cutlass.const_expr(scaled):
                f0 = scale(kt, row0)
                f1 = scale(kt, row0 + 8)
            warpgroup.fence()
            if cutlass.const_expr(scaled):
                tiled_mma.set(warpgroup.Field.ACCUMULATE, False)
            for kb in cutlass.range_constexpr(num_k_blocks):
                for d, tCrB in zip(dest, tCrBs, strict=True):
                    cute.gemm(tiled_mma, d, tCrA[None, None, kb, read.index], tCrB[None, None, kb, read.index], d)
                tiled_mma.set(warpgroup.Field.ACCUMULATE, True)
            warpgroup.commit_group()
            if cutlass.const_expr(scaled):
                warpgroup.wait_group(0)
                for acc, tmp in zip(accs, tmps, strict=True):
                    for i in cutlass.range_constexpr(cute.size(acc)):
                        acc[i] = acc[i] + tmp[i] * (f1 if half[i] else f0)
                ring.consumer_release(release)
                release.advance()
            else:
                # keep this k-tile's WGMMAs in flight; the previous k-tile's slot is free once they retire
                warpgroup.wait_group(1)
                if kt > 0:
                    ring.consumer_release(release)
                    release.advance()
            read.advance()
            # the slot just released is the one the next k-tile goes to (bf16: from kt = 1 on)
            if warp_idx == 0 and prod.count < k_tiles and (cutlass.const_expr(scaled) or kt > 0):
                _W__produce(ring, prod, tma_a, tAgA, tAsA, tma_b, tBs, b_alt, tBs_alt, tile.use_alt, tile.b_k_div)
                prod.advance()
        warpgroup.wait_group(0)
        if cutlass.const_expr(not scaled) and k_tiles > 0:  # the last k-tile's slot
            ring.consumer_release(release)
            release.advance()
        epilogue(t, tile, accs, coords, xch)
        t = t + grid


def _W__b_part(cfg: _W_GemmConfig, tma: Any, m_b: cute.Tensor, sB: cute.Tensor, coord: tuple[Any, Any]) -> tuple:
    """TMA partition (smem, gmem) of the B tile at (n tile, L index) coord."""
    g = cute.local_tile(m_b, cfg.tile_mnk, (0, coord[0], None, coord[1]), proj=(None, 1, 1))
    return cpasync.tma_partition(tma, 0, cute.make_layout(1), cute.group_modes(sB, 0, 2), cute.group_modes(g, 0, 2))


def _W_accumulator_coords(tiled_mma: Any, tidx: Any, bm: int, bn: int) -> cute.Tensor:
    """(row, column) in the bm x bn tile of each accumulator element of thread `tidx`.

    The thread's own slice of the tiled MMA: WGMMA's accumulator layout differs from thread to thread.
    (The warpgroup slice that partitions the shared-memory operands, whose layout maps all 128 threads
    of a warpgroup to the same tile, would give every thread its warpgroup's thread-0 coordinates.)
    A split_n MMA spans one warpgroup, so both warpgroups take the slice of tidx % 128.
    """
    return tiled_mma.get_slice(tidx % cute.size(tiled_mma)).partition_C(cute.make_identity_tensor((bm, bn)))


def _W_row_halves(tiled_mma: Any, bm: int, bn: int) -> list[int]:
    """For every accumulator element of a thread: 0 if it lies in the thread's first row r, 1 if in r + 8.

    The fragment layout is the same for every thread, so thread 0's static coordinates give it at
    trace time (WGMMA: each thread holds two rows, 8 apart, of its warp's 16).
    """
    rel = tiled_mma.get_slice(0).partition_C(cute.make_identity_tensor((bm, bn)))
    offsets = [rel[i][0] - rel[0][0] for i in range(cute.size(rel))]
    if set(offsets) != {0, 8}:
        raise ValueError(f"unexpected accumulator rows {sorted(set(offsets))}")
    return [o // 8 for o in offsets]


@cute.jit
def _W__produce(
    ring: Any,
    state: Any,
    tma_a: Any,
    tAgA: Any,
    tAsA: Any,
    tma_b: Any,
    tBs: list,
    b_alt: Any,
    tBs_alt: list,
    use_alt: Any,
    b_k_div: cutlass.Constexpr,
) -> None:
    """Thread-0 TMA issue of k-tile state.count into ring slot state.index."""
    ring.producer_acquire(state)
    bar = ring.producer_get_barrier(state)
    cute.copy(tma_a, tAgA[None, state.count], tAsA[None, state.index], tma_bar_ptr=bar)
    kb = state.count // b_k_div
    if cutlass.const_expr(b_alt is None):
        for tBsB, tBgB in tBs:
            cute.copy(tma_b, tBgB[None, kb], tBsB[None, state.index], tma_bar_ptr=bar)
    else:
        if use_alt:
            for tBsB, tBgB in tBs_alt:
                cute.copy(b_alt[0], tBgB[None, kb], tBsB[None, state.index], tma_bar_ptr=bar)
        else:
            for tBsB, tBgB in tBs:
                cute.copy(tma_b, tBgB[None, kb], tBsB[None, state.index], tma_bar_ptr=bar)
    ring.producer_commit(state)


@cute.jit
def _W_raster(t: Any, m_tiles: Any, n_tiles: Any, group: int = 8) -> tuple[Any, Any]:
    """(m tile, n tile) of linear tile t, walking `group` m-tiles at a time across all n-tiles, so
    consecutive CTAs share one B tile and a band of A tiles stays in L2."""
    band = group * n_tiles
    first = t // band * group
    size = cutlass.min(m_tiles - first, group)
    rest = t % band
    return first + rest % size, rest // size


@cute.jit
def _W_store_tile(m_out: cute.Tensor, frag: cute.Tensor, coords: cute.Tensor, row0: Any, col0: Any, bn: int) -> None:
    """Store register fragment `frag` of a CTA tile at (row0, col0) of m_out, skipping rows and columns
    past m_out's extent. The column test is hoisted out of full tiles, so each thread's adjacent column
    pairs merge into one 32-bit store."""
    rows, cols = cute.size(m_out, mode=[0]), cute.size(m_out, mode=[1])
    if col0 + bn <= cols:
        for i in cutlass.range_constexpr(cute.size(frag)):
            if row0 + coords[i][0] < rows:
                m_out[row0 + coords[i][0], col0 + coords[i][1]] = frag[i]
    else:
        for i in cutlass.range_constexpr(cute.size(frag)):
            if row0 + coords[i][0] < rows and col0 + coords[i][1] < cols:
                m_out[row0 + coords[i][0], col0 + coords[i][1]] = frag[i]


def _W_rows_k_l(x: Any) -> Any:
    """A torch [L, rows, K] (or [rows, K]) tensor as the (rows, K, L) view the GEMM's TMA tensors take."""
    if x.dim() == 2:
        x = x.unsqueeze(0)
    return x.permute(1, 2, 0)


_W_FP8_BN = 128  # block-FP8 GEMM column tile: exactly one 128-row weight scale block


def _W_block_fp8_tile(mt: Any, nt: Any, m_sa: cute.Tensor, m_sb: cute.Tensor) -> _W_Tile:
    """Tile (mt, nt) of a W8A8 block-FP8 GEMM: A codes with scales m_sa [K / 128, rows] (rows past the end
    read the last row's scale; their results are never stored), B with 128 x 128 block scales
    m_sb [N / 128, K / 128]."""
    rows = cute.size(m_sa, mode=[1])
    m0 = mt * _W_BM

    def scale(kt: Any, row: Any) -> Any:
        return m_sa[kt, cutlass.min(m0 + row, rows - 1)] * m_sb[nt, kt]

    return _W_Tile((mt, 0), [(nt, 0)], cute.size(m_sb, mode=[1]), scale)


W = SimpleNamespace(
    BM=_W_BM,
    THREADS=_W_THREADS,
    WG_THREADS=_W_WG_THREADS,
    K_STEPS=_W_K_STEPS,
    SMEM_BUDGET=_W_SMEM_BUDGET,
    SMS=_W_SMS,
    GemmConfig=_W_GemmConfig,
    Tile=_W_Tile,
    gemm_persistent=_W_gemm_persistent,
    _b_part=_W__b_part,
    accumulator_coords=_W_accumulator_coords,
    row_halves=_W_row_halves,
    _produce=_W__produce,
    raster=_W_raster,
    store_tile=_W_store_tile,
    rows_k_l=_W_rows_k_l,
    FP8_BN=_W_FP8_BN,
    block_fp8_tile=_W_block_fp8_tile,
)


# problems/moe/solutions/_moe_cutedsl.py
_M_BM = W.BM
_M_GU = 128  # intermediate columns per GEMM1 tile (gate tile + up tile)
_M_BN2 = 256  # hidden columns per GEMM2 tile
_M_VEC = 8  # bf16 per 16-byte access
_M_THREADS = 256
_M_MAX_SEGMENTS = 128
_M_CFG1 = W.GemmConfig(cutlass.BFloat16, _M_GU, n_b=2)
_M_CFG2 = W.GemmConfig(cutlass.BFloat16, _M_BN2)


def _M_max_tiles(tokens: int, local: int, top_k: int, shared: int) -> int:
    """Upper bound of 128-row tiles: every pair local, every expert segment ending in a partial tile."""
    return (tokens * min(top_k, local) + _M_BM - 1) // _M_BM + local + shared * ((tokens + _M_BM - 1) // _M_BM)


@cute.kernel
def _M__scan_kernel(mCNT: cute.Tensor, mOFF: cute.Tensor, mTILE: cute.Tensor, shared_blocks: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    local = cute.size(mCNT)
    segs = cute.size(mOFF) - 1
    maxt = cute.size(mTILE)
    soff = cutlass.utils.SmemAllocator().allocate_tensor(cutlass.Int32, cute.make_layout((_M_MAX_SEGMENTS + 1,)), 16)
    if tidx == 0:
        run = cutlass.Int32(0)
        for e in cutlass.range(segs, unroll=1):
            soff[e] = run
            mOFF[e] = run
            blocks = shared_blocks
            if e < local:
                blocks = (mCNT[e] + _M_BM - 1) // _M_BM
            run = run + blocks
        soff[segs] = run
        mOFF[segs] = run
    cute.arch.sync_threads()
    for blk in cutlass.range(tidx, maxt, _M_THREADS, unroll=1):
        seg = cutlass.Int32(-1)
        for e in cutlass.range(segs, unroll=1):
            if soff[e] <= blk and blk < soff[e + 1]:
                seg = e
        mTILE[blk] = seg


@cute.jit
def _M__scan(mCNT: cute.Tensor, mOFF: cute.Tensor, mTILE: cute.Tensor, shared_blocks: cutlass.Int32):
    _M__scan_kernel(mCNT, mOFF, mTILE, shared_blocks).launch(grid=[1, 1, 1], block=[_M_THREADS, 1, 1])


def _M__scatter_fn(top_k: int, nv: int):
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
        chunks = cute.size(mX, mode=[1]) // _M_VEC
        gX = cute.zipped_divide(mX, (1, _M_VEC))  # ((1, VEC), (T, chunks))
        gXP = cute.zipped_divide(mXP, (1, _M_VEC))
        dst = []
        for j in cutlass.range_constexpr(top_k):
            e = mPE[t, j]
            dst.append(cutlass.select_(e >= 0, mOFF[cutlass.max(e, 0)] * _M_BM + mPS[t, j], cutlass.Int32(-1)))
        for j in cutlass.range_constexpr(nv):
            dst.append(mOFF[local + j] * _M_BM + t)
        for c in cutlass.range(tidx, chunks, _M_THREADS, unroll=1):
            rX = cute.make_rmem_tensor((_M_VEC,), cutlass.BFloat16)
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
            grid=[tokens, 1, 1], block=[_M_THREADS, 1, 1]
        )

    return scatter


def _M__silu_mul(g, u):
    return g / (cutlass.Float32(1.0) + cute.math.exp(-g)) * u


@cute.kernel
def _M__gemm1_kernel(
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
    n_tiles = (inter + _M_GU - 1) // _M_GU
    blocks = mOFF[cute.size(mOFF) - 1]

    def tile_fn(t):
        mt, nt = W.raster(t, blocks, n_tiles)
        seg = mTILE[mt]
        e = cutlass.min(seg, local - 1)
        s = cutlass.max(seg - local, 0)
        k_tiles = cute.size(mXP, mode=[1]) // _M_CFG1.bk
        return W.Tile((mt, 0), [(nt, 2 * e), (nt, 2 * e + 1)], k_tiles, None, [(nt, s), (nt, nv + s)], seg >= local)

    def epilogue(t, tile, accs, coords, xch):
        gate, up = accs
        for i in cutlass.range_constexpr(cute.size(gate)):
            gate[i] = _M__silu_mul(gate[i], up[i])
        out = cute.make_rmem_tensor(gate.shape, cutlass.BFloat16)
        out.store(gate.load().to(cutlass.BFloat16))
        W.store_tile(mACT, out, coords, tile.a[0] * _M_BM, tile.b[0][0] * _M_GU, _M_GU)

    W.gemm_persistent(
        _M_CFG1,
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
def _M__gemm1(
    mXP: cute.Tensor,
    mW: cute.Tensor,
    mSW: cute.Tensor,
    mOFF: cute.Tensor,
    mTILE: cute.Tensor,
    mACT: cute.Tensor,
):
    tiled_mma, a_smem, b_smem = _M_CFG1.layouts()
    tma_a, gA = _M_CFG1.tma_a(mXP, a_smem)
    tma_b, gB = _M_CFG1.tma_b(mW, b_smem)
    tma_s, gS = _M_CFG1.tma_b(mSW, b_smem)
    _M__gemm1_kernel(tiled_mma, a_smem, b_smem, tma_a, gA, tma_b, gB, tma_s, gS, mOFF, mTILE, mACT).launch(
        grid=[W.SMS, 1, 1], block=[W.THREADS, 1, 1]
    )


@cute.kernel
def _M__gemm2_kernel(
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
    n_tiles = (hidden + _M_BN2 - 1) // _M_BN2
    blocks = mOFF[cute.size(mOFF) - 1]
    halves = W.row_halves(tiled_mma, _M_BM, _M_BN2)

    def tile_fn(t):
        mt, nt = W.raster(t, blocks, n_tiles)
        seg = mTILE[mt]
        e = cutlass.min(seg, local - 1)
        s = cutlass.max(seg - local, 0)
        k_tiles = cute.size(mACT, mode=[1]) // _M_CFG2.bk
        return W.Tile((mt, 0), [(nt, e)], k_tiles, None, [(nt, s)], seg >= local)

    def epilogue(t, tile, accs, coords, xch):
        (acc,) = accs
        row0 = tile.a[0] * _M_BM + coords[0][0]
        w0, w1 = mRW[row0], mRW[row0 + 8]
        for i in cutlass.range_constexpr(cute.size(acc)):
            acc[i] = acc[i] * (w1 if halves[i] else w0)
        out = cute.make_rmem_tensor(acc.shape, cutlass.BFloat16)
        out.store(acc.load().to(cutlass.BFloat16))
        W.store_tile(mY, out, coords, tile.a[0] * _M_BM, tile.b[0][0] * _M_BN2, _M_BN2)

    W.gemm_persistent(
        _M_CFG2,
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
def _M__gemm2(
    mACT: cute.Tensor,
    mW: cute.Tensor,
    mSW: cute.Tensor,
    mOFF: cute.Tensor,
    mTILE: cute.Tensor,
    mRW: cute.Tensor,
    mY: cute.Tensor,
):
    tiled_mma, a_smem, b_smem = _M_CFG2.layouts()
    tma_a, gA = _M_CFG2.tma_a(mACT, a_smem)
    tma_b, gB = _M_CFG2.tma_b(mW, b_smem)
    tma_s, gS = _M_CFG2.tma_b(mSW, b_smem)
    _M__gemm2_kernel(tiled_mma, a_smem, b_smem, tma_a, gA, tma_b, gB, tma_s, gS, mOFF, mTILE, mRW, mY).launch(
        grid=[W.SMS, 1, 1], block=[W.THREADS, 1, 1]
    )


@cute.kernel
def _M__combine_kernel(mY: cute.Tensor, mTR: cute.Tensor, mOut: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    t, _, _ = cute.arch.block_idx()
    chunks = cute.size(mOut, mode=[1]) // _M_VEC
    slots = cute.size(mTR, mode=[1])
    gY = cute.zipped_divide(mY, (1, _M_VEC))
    gO = cute.zipped_divide(mOut, (1, _M_VEC))
    for c in cutlass.range(tidx, chunks, _M_THREADS, unroll=1):
        acc = cute.make_rmem_tensor((_M_VEC,), cutlass.Float32)
        acc.fill(0.0)
        for j in cutlass.range(slots, unroll=1):
            r = mTR[t, j]
            if r >= 0:
                rY = cute.make_rmem_tensor((_M_VEC,), cutlass.BFloat16)
                cute.autovec_copy(gY[(0, None), (r, c)], rY)
                acc.store(acc.load() + rY.load().to(cutlass.Float32))
        rO = cute.make_rmem_tensor((_M_VEC,), cutlass.BFloat16)
        rO.store(acc.load().to(cutlass.BFloat16))
        cute.autovec_copy(rO, gO[(0, None), (t, c)])


@cute.jit
def _M__combine(mY: cute.Tensor, mTR: cute.Tensor, mOut: cute.Tensor):
    _M__combine_kernel(mY, mTR, mOut).launch(grid=[cute.size(mOut, mode=[0]), 1, 1], block=[_M_THREADS, 1, 1])


_M__COMPILED: dict[object, object] = {}
_M_OPTS = "--enable-tvm-ffi"


def _M__mat(dtype, shape, align=16):
    return make_fake_compact_tensor(dtype, shape, stride_order=(1, 0), assumed_align=align)


def _M__vec(dtype, n):
    return make_fake_compact_tensor(dtype, (n,), assumed_align=4)


def _M_compiled_scan():
    """The scan kernel (sizes symbolic): (counts, offsets, tile table, blocks of a shared segment)."""
    if "scan" not in _M__COMPILED:
        el, segs, maxt = (cute.sym_int() for _ in range(3))
        i32 = cutlass.Int32
        _M__COMPILED["scan"] = cute.compile(
            _M__scan, _M__vec(i32, el), _M__vec(i32, segs), _M__vec(i32, maxt), i32(0), options=_M_OPTS
        )
    return _M__COMPILED["scan"]


def _M_compiled_combine(slots: int):
    """The combine kernel for `slots` rows per token (sizes symbolic)."""
    if ("combine", slots) not in _M__COMPILED:
        t, rows, h = cute.sym_int(), cute.sym_int(), cute.sym_int(divisibility=64)
        bf16 = cutlass.BFloat16
        _M__COMPILED[("combine", slots)] = cute.compile(
            _M__combine,
            _M__mat(bf16, (rows, h)),
            _M__mat(cutlass.Int32, (t, slots), 4),
            _M__mat(bf16, (t, h)),
            options=_M_OPTS,
        )
    return _M__COMPILED[("combine", slots)]


def _M_compiled(top_k: int, nv: int) -> tuple:
    """(scan, scatter, GEMM1, GEMM2, combine) for top-k routing and nv shared segments (sizes symbolic)."""
    if (top_k, nv) not in _M__COMPILED:
        t, rows, maxt, el, ev, segs = (cute.sym_int() for _ in range(6))
        h, i = cute.sym_int(divisibility=64), cute.sym_int(divisibility=64)  # whole k-tiles of 64
        bf16, i32, f32 = cutlass.BFloat16, cutlass.Int32, cutlass.Float32

        def rows_k_l(shape):  # (rows, K, L): K contiguous, then rows, then L
            return make_fake_compact_tensor(bf16, shape, stride_order=(1, 0, 2), assumed_align=16)

        i_s, h_s = (
            cute.sym_int(divisibility=64),
            cute.sym_int(divisibility=64),
        )  # shared down-projection strides
        _M__COMPILED[(top_k, nv)] = (
            _M_compiled_scan(),
            cute.compile(
                _M__scatter_fn(top_k, nv),
                _M__mat(bf16, (t, h)),
                _M__mat(i32, (t, top_k), 4),
                _M__mat(f32, (t, top_k), 4),
                _M__mat(i32, (t, top_k), 4),
                _M__vec(f32, t),
                _M__vec(i32, segs),
                _M__mat(bf16, (rows, h)),
                _M__vec(f32, rows),
                _M__mat(i32, (t, top_k + nv), 4),
                options=_M_OPTS,
            ),
            cute.compile(
                _M__gemm1,
                rows_k_l((rows, h, 1)),
                rows_k_l((i, h, el)),
                rows_k_l((i, h, ev)),
                _M__vec(i32, segs),
                _M__vec(i32, maxt),
                _M__mat(bf16, (rows, i)),
                options=_M_OPTS,
            ),
            cute.compile(
                _M__gemm2,
                rows_k_l((rows, i, 1)),
                rows_k_l((h, i, el)),
                make_fake_tensor(bf16, (h, i, ev), (i_s, 1, h_s), assumed_align=16),
                _M__vec(i32, segs),
                _M__vec(i32, maxt),
                _M__vec(f32, rows),
                _M__mat(bf16, (rows, h)),
                options=_M_OPTS,
            ),
            _M_compiled_combine(top_k + nv),
        )
    return _M__COMPILED[(top_k, nv)]


def _M_run_pipeline(
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
    k_scan, k_scatter, k_gemm1, k_gemm2, k_combine = _M_compiled(top_k, nv)
    tiles = _M_max_tiles(tokens, local, top_k, nv)
    dev = x.device
    offsets = torch.empty(local + nv + 1, dtype=torch.int32, device=dev)
    table = torch.empty(tiles, dtype=torch.int32, device=dev)
    k_scan(counts, offsets, table, (tokens + _M_BM - 1) // _M_BM)
    xp = torch.empty((tiles * _M_BM, hidden), dtype=torch.bfloat16, device=dev)
    row_w = torch.empty(tiles * _M_BM, dtype=torch.float32, device=dev)
    token_rows = torch.empty((tokens, top_k + nv), dtype=torch.int32, device=dev)
    k_scatter(x, pair_expert, pair_weight, pair_slot, shared_gate, offsets, xp, row_w, token_rows)
    act = torch.empty((tiles * _M_BM, inter), dtype=torch.bfloat16, device=dev)
    # weights as (intermediate, hidden, 2 x experts): gate of expert e = L 2e, up = L 2e + 1; the shared
    # gate/up of segment s = L s / nv + s
    gate_up = W.rows_k_l(w13.view(2 * local, inter, hidden))
    shared_gate_up = W.rows_k_l(shared_w13.view(2 * nv, inter, hidden))
    k_gemm1(W.rows_k_l(xp), gate_up, shared_gate_up, offsets, table, act)
    y = torch.empty((tiles * _M_BM, hidden), dtype=torch.bfloat16, device=dev)
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


M = SimpleNamespace(
    BM=_M_BM,
    GU=_M_GU,
    BN2=_M_BN2,
    VEC=_M_VEC,
    THREADS=_M_THREADS,
    MAX_SEGMENTS=_M_MAX_SEGMENTS,
    CFG1=_M_CFG1,
    CFG2=_M_CFG2,
    max_tiles=_M_max_tiles,
    _scan_kernel=_M__scan_kernel,
    _scan=_M__scan,
    _scatter_fn=_M__scatter_fn,
    _silu_mul=_M__silu_mul,
    _gemm1_kernel=_M__gemm1_kernel,
    _gemm1=_M__gemm1,
    _gemm2_kernel=_M__gemm2_kernel,
    _gemm2=_M__gemm2,
    _combine_kernel=_M__combine_kernel,
    _combine=_M__combine,
    _COMPILED=_M__COMPILED,
    OPTS=_M_OPTS,
    _mat=_M__mat,
    _vec=_M__vec,
    compiled_scan=_M_compiled_scan,
    compiled_combine=_M_compiled_combine,
    compiled=_M_compiled,
    run_pipeline=_M_run_pipeline,
)

# ---- end of bundle ----


EXPERTS = 64
LOCAL = 32
TOP_K = 6
NORM_MIN = 1e-12
THREADS = 256
TOKENS_PER_CTA = THREADS // 32
NEG_BIG = -3.0e38


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
    p = [mL[row, lane], mL[row, lane + 32]]
    mx = cute.arch.warp_reduction_max(cute.arch.fmax(p[0], p[1]))
    p = [cute.math.exp(v - mx) for v in p]
    total = cute.arch.warp_reduction_sum(p[0] + p[1])
    p = [v / total for v in p]
    c = [p[i] + mB[lane + 32 * i] for i in range(2)]
    sel_id = []
    sel_p = []
    for _ in cutlass.range_constexpr(TOP_K):
        best = cutlass.Float32(NEG_BIG)
        best_id = cutlass.Int32(EXPERTS)
        best_p = cutlass.Float32(0.0)
        for i in cutlass.range_constexpr(2):
            if c[i] > best:
                best = c[i]
                best_id = lane + 32 * i
                best_p = p[i]
        for k in cutlass.range_constexpr(5):
            ov = cute.arch.shuffle_sync_bfly(best, offset=16 >> k)
            oi = cute.arch.shuffle_sync_bfly(best_id, offset=16 >> k)
            op = cute.arch.shuffle_sync_bfly(best_p, offset=16 >> k)
            if ov > best or (ov == best and oi < best_id):
                best = ov
                best_id = oi
                best_p = op
        sel_id.append(best_id)
        sel_p.append(best_p)
        for i in cutlass.range_constexpr(2):
            if best_id == lane + 32 * i:
                c[i] = cutlass.Float32(NEG_BIG)
    psum = cutlass.Float32(0.0)
    for r in cutlass.range_constexpr(TOP_K):
        psum = psum + sel_p[r]
    inv = cutlass.Float32(1.0) / cute.arch.fmax(psum, cutlass.Float32(NORM_MIN))
    if tok < tokens and lane == 0:
        for r in cutlass.range_constexpr(TOP_K):
            e = sel_id[r] - offset
            if e >= 0 and e < LOCAL:
                mPE[tok, r] = e
                mPS[tok, r] = cute.arch.atomic_add(mCNT.iterator + e, cutlass.Int32(1))
            else:
                mPE[tok, r] = cutlass.Int32(-1)
                mPS[tok, r] = cutlass.Int32(0)
            mPW[tok, r] = sel_p[r] * inv


@cute.jit
def _route(
    mL: cute.Tensor, mB: cute.Tensor, offset: cutlass.Int32, mPE: cute.Tensor, mPW: cute.Tensor,
    mPS: cute.Tensor, mCNT: cute.Tensor,
):  # fmt: skip
    grid = (cute.size(mL, mode=[0]) + TOKENS_PER_CTA - 1) // TOKENS_PER_CTA
    _route_kernel(mL, mB, offset, mPE, mPW, mPS, mCNT).launch(grid=[grid, 1, 1], block=[THREADS, 1, 1])


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        t = cute.sym_int()
        f32, i32 = cutlass.Float32, cutlass.Int32
        logits = make_fake_compact_tensor(f32, (t, EXPERTS), stride_order=(1, 0), assumed_align=16)
        bias = make_fake_compact_tensor(f32, (EXPERTS,), assumed_align=16)
        pe, ps = (make_fake_compact_tensor(i32, (t, TOP_K), stride_order=(1, 0), assumed_align=4) for _ in range(2))
        pw = make_fake_compact_tensor(f32, (t, TOP_K), stride_order=(1, 0), assumed_align=4)
        cnt = make_fake_compact_tensor(i32, (LOCAL,), assumed_align=4)
        route = cute.compile(_route, logits, bias, i32(0), pe, pw, ps, cnt, options="--enable-tvm-ffi")
        _COMPILED.extend((route, *M.compiled(TOP_K, 2)))
    return _COMPILED


def run(
    hidden_states: torch.Tensor,
    router_logits: torch.Tensor,
    e_score_correction_bias: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    shared_w13: torch.Tensor,
    shared_w2: torch.Tensor,
    local_expert_offset: int,
) -> torch.Tensor:
    route = _compiled()[0]
    tokens = hidden_states.shape[0]
    dev = hidden_states.device
    pair_e = torch.empty((tokens, TOP_K), dtype=torch.int32, device=dev)
    pair_w = torch.empty((tokens, TOP_K), dtype=torch.float32, device=dev)
    pair_s = torch.empty((tokens, TOP_K), dtype=torch.int32, device=dev)
    counts = torch.zeros(LOCAL, dtype=torch.int32, device=dev)
    route(router_logits, e_score_correction_bias, int(local_expert_offset), pair_e, pair_w, pair_s, counts)
    ones = torch.ones(tokens, dtype=torch.float32, device=dev)  # shared rows: weight 1
    return M.run_pipeline(TOP_K, hidden_states, pair_e, pair_w, pair_s, counts, ones, w13, w2, shared_w13, shared_w2)
