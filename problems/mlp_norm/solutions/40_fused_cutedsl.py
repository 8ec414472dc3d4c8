"""p40 magnitude_normalized_collapse_gemma3n_e2b_altup — plan `fused`, CuTe DSL: tensor-core GEMMs, then the collapse.

Plan: (1) the three unembed GEMMs p_i = stream_{i+1} W_i^T (bf16 in, float32 accumulate, rounded to bf16,
as the reference's bmm) run on tensor cores as one batched grid (the side stream is the L mode of
A [tokens, 2048, 3], B [2048, 2048, 3], C [tokens, 2048, 3]; views of the inputs, no copies): 128 × 128
tiles over K = 2048 in steps of 32, a tiled MMA of 2 × 4 warp atoms mma.sync m16n8k16 (bf16 → f32).
Tiles move global → shared with 16-byte cp.async in a 3-stage pipeline into swizzled K-major layouts,
fragments come from shared memory with ldmatrix.x4 (no transposes: both operands are K-contiguous),
double-buffered in registers across the two k16 blocks of a stage. The epilogue rounds the tile to bf16
into shared memory, writes it with 16-byte coalesced stores (rows past the last token predicated off),
and each of 128 threads sums one row's squares of the rounded values into a [3, tokens, 16] float32
partial. (2) collapse, one CTA of 256 threads per token (8 features per thread, 16-byte loads):
target = sqrt(mean(stream0^2)) by a CTA reduction, s_i = the 16 partials, out = (stream0 + Σ p_i ·
target / sqrt(max(s_i/2048, 1e-5))) / 4 in float32, rounded once. Compute-bound: 206 GFLOP on tensor
cores; the intermediate p (100 MB) is written once and read once. Tokens are symbolic: one compilation
per kernel, cached, called through TVM FFI.
"""

import math

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor
from cutlass.memory.smem import SmemAllocator

D = 2048  # hidden size (M x N x K = tokens x 2048 x 2048 per GEMM)
SIDE = 3  # side streams / GEMMs
BM = 128
BN = 128
BK = 32
STAGES = 3
THREADS = 256
WARPS_M, WARPS_N = 2, 4
NBLK = D // BN  # column tiles per row: partial sums per token and GEMM (16)
COPY_BITS = 128  # 16-byte cp.async / stores
EPS = 1e-5
COL_THREADS = 256  # collapse kernel
VEC = 8


def _smem_layout(rows: int, cols: int, stages: int | None):
    """K-major (cols contiguous) shared layout in 8-row atoms with the XOR swizzle that makes the 16-byte
    ldmatrix row reads of an 8 × 8 block hit distinct banks."""
    elem_bits = 16
    major = min(cols, 128 * 8 // elem_bits)
    swizzle = cute.make_swizzle(
        min(int(math.log2(major * elem_bits // COPY_BITS)), 3),
        int(math.log2(COPY_BITS // 8)),
        int(math.log2(COPY_BITS // elem_bits)),
    )
    atom = cute.make_layout((8, major), stride=(major, 1))
    shape = (rows, cols) if stages is None else (rows, cols, stages)
    order = (0, 1) if stages is None else (0, 1, 2)
    return cute.tile_to_shape(atom, shape, order), swizzle


def _gmem_copy(atom, cols: int):
    """Threads laid out K-major: cols / 8 threads per row, 8 bf16 (16 bytes) each."""
    per_row = cols // (COPY_BITS // 16)
    threads = cute.make_layout((THREADS // per_row, per_row), stride=(per_row, 1))
    return cute.make_tiled_copy_tv(atom, threads, cute.make_layout((1, COPY_BITS // 16)))


@cute.kernel
def _gemm_kernel(
    mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, mPart: cute.Tensor, tiled_mma: cute.TiledMma,
    copy_ab: cute.TiledCopy, copy_c: cute.TiledCopy,
):  # fmt: skip
    tidx, _, _ = cute.arch.thread_idx()
    bm, bn, side = cute.arch.block_idx()
    tokens = cute.size(mA, mode=[0])
    tiler = (BM, BN, BK)
    coord = (bm, bn, None)
    gA = cute.local_tile(mA[None, None, side], tiler=tiler, coord=coord, proj=(1, None, 1))  # (BM, BK, k)
    gB = cute.local_tile(mB[None, None, side], tiler=tiler, coord=coord, proj=(None, 1, 1))  # (BN, BK, k)
    gC = cute.local_tile(mC[None, None, side], tiler=tiler, coord=coord, proj=(1, 1, None))  # (BM, BN)
    cA = cute.local_tile(
        cute.make_identity_tensor(mA.layout.shape)[None, None, side], tiler=tiler, coord=coord, proj=(1, None, 1)
    )
    sA_layout, sA_swizzle = _smem_layout(BM, BK, STAGES)
    sB_layout, sB_swizzle = _smem_layout(BN, BK, STAGES)
    sC_layout, sC_swizzle = _smem_layout(BM, BN, None)
    smem = SmemAllocator()
    sA = smem.allocate_tensor(cutlass.BFloat16, sA_layout, byte_alignment=128, swizzle=sA_swizzle)
    sB = smem.allocate_tensor(cutlass.BFloat16, sB_layout, byte_alignment=128, swizzle=sB_swizzle)
    sC = smem.allocate_tensor(cutlass.BFloat16, sC_layout, byte_alignment=128, swizzle=sC_swizzle)
    thr_ab = copy_ab.get_slice(tidx)
    tAgA, tAsA = thr_ab.partition_S(gA), thr_ab.partition_D(sA)
    tBgB, tBsB = thr_ab.partition_S(gB), thr_ab.partition_D(sB)
    tAcA = thr_ab.partition_S(cA)
    # rows of A past the last token: predicated off (zero-filled shared memory), per copy atom
    tApA = cute.make_rmem_tensor(
        cute.make_layout((tAgA.shape[0][1], cute.size(tAgA, mode=[1]), cute.size(tAgA, mode=[2])),
                         stride=(cute.size(tAgA, mode=[1]), 1, 0)),
        cutlass.Boolean,
    )  # fmt: skip
    for v in range(tApA.shape[0]):
        for m in range(tApA.shape[1]):
            tApA[v, m, 0] = cute.elem_less(tAcA[(0, v), m, 0, 0][0], tokens)
    tAsA.fill(0)
    cute.arch.sync_threads()
    k_tiles = cute.size(tAgA, mode=[3])
    for s in range(STAGES - 1):  # prologue: stages 0 .. STAGES - 2 in flight
        cute.copy(copy_ab, tAgA[None, None, None, s], tAsA[None, None, None, s], pred=tApA)
        cute.copy(copy_ab, tBgB[None, None, None, s], tBsB[None, None, None, s])
        cute.arch.cp_async_commit_group()
    thr_mma = tiled_mma.get_slice(tidx)
    tCsA, tCsB = thr_mma.partition_A(sA), thr_mma.partition_B(sB)
    tCrA = tiled_mma.make_fragment_A(tCsA[None, None, None, 0])
    tCrB = tiled_mma.make_fragment_B(tCsB[None, None, None, 0])
    tCrC = tiled_mma.make_fragment_C(thr_mma.partition_C(gC))
    tCrC.fill(0.0)
    ld_a = cute.make_tiled_copy_A(
        cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(False, 4), cutlass.BFloat16), tiled_mma
    )
    ld_b = cute.make_tiled_copy_B(
        cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(False, 4), cutlass.BFloat16), tiled_mma
    )
    thr_ld_a, thr_ld_b = ld_a.get_slice(tidx), ld_b.get_slice(tidx)
    tCsA_v, tCrA_v = thr_ld_a.partition_S(sA), thr_ld_a.retile(tCrA)
    tCsB_v, tCrB_v = thr_ld_b.partition_S(sB), thr_ld_b.retile(tCrB)
    k_blocks = cute.size(tCrA, mode=[2])
    read = 0
    write = STAGES - 1
    cute.arch.cp_async_wait_group(STAGES - 2)
    cute.arch.sync_threads()
    cute.copy(ld_a, tCsA_v[None, None, 0, read], tCrA_v[None, None, 0])
    cute.copy(ld_b, tCsB_v[None, None, 0, read], tCrB_v[None, None, 0])
    for kt in range(k_tiles):
        for kb in cutlass.range(k_blocks, unroll_full=True):
            if kb == k_blocks - 1:  # the next stage must have landed before its first fragment load
                read = read + 1
                if read == STAGES:
                    read = 0
                cute.arch.cp_async_wait_group(STAGES - 2)
                cute.arch.sync_threads()
            kb_next = (kb + 1) % k_blocks
            cute.copy(ld_a, tCsA_v[None, None, kb_next, read], tCrA_v[None, None, kb_next])
            cute.copy(ld_b, tCsB_v[None, None, kb_next, read], tCrB_v[None, None, kb_next])
            if kb == 0:  # refill the stage consumed in the previous k tile
                if kt + STAGES - 1 < k_tiles:
                    cute.copy(
                        copy_ab, tAgA[None, None, None, kt + STAGES - 1], tAsA[None, None, None, write], pred=tApA
                    )
                    cute.copy(copy_ab, tBgB[None, None, None, kt + STAGES - 1], tBsB[None, None, None, write])
                cute.arch.cp_async_commit_group()  # possibly empty: keeps the group count per step fixed
                write = write + 1
                if write == STAGES:
                    write = 0
            cute.gemm(tiled_mma, tCrC, tCrA[None, None, kb], tCrB[None, None, kb], tCrC)
    cute.arch.cp_async_wait_group(0)
    # epilogue: bf16 tile into shared memory, then row sums of squares and coalesced stores
    tCrD = cute.make_fragment_like(tCrC, cutlass.BFloat16)
    tCrD.store(tCrC.load().to(cutlass.BFloat16))
    cute.autovec_copy(tCrD, thr_mma.partition_C(sC))
    cute.arch.sync_threads()
    if tidx < BM:  # noqa: SIM102 (dynamic conditions, one per if)
        if bm * BM + tidx < tokens:
            ss = cutlass.Float32(0.0)
            for c in cutlass.range(BN, unroll=8):
                x = cutlass.Float32(sC[tidx, c])
                ss = ss + x * x
            mPart[bm * BM + tidx, bn, side] = ss
    thr_c = copy_c.get_slice(tidx)
    tCsC, tCgC = thr_c.partition_S(sC), thr_c.partition_D(gC)
    tCcC = thr_c.partition_S(
        cute.local_tile(cute.make_identity_tensor(mC.layout.shape)[None, None, side], tiler=tiler, coord=coord,
                        proj=(1, 1, None))
    )  # fmt: skip
    tCrO = cute.make_fragment_like(tCsC)
    cute.autovec_copy(tCsC, tCrO)
    # rows past the last token: predicated off, per 16-byte store
    tCpC = cute.make_rmem_tensor(
        cute.make_layout((tCgC.shape[0][1], cute.size(tCgC, mode=[1]), cute.size(tCgC, mode=[2])),
                         stride=(cute.size(tCgC, mode=[1]), 1, 0)),
        cutlass.Boolean,
    )  # fmt: skip
    for v in range(tCpC.shape[0]):
        for m in range(tCpC.shape[1]):
            tCpC[v, m, 0] = cute.elem_less(tCcC[(0, v), m, 0][0], tokens)
    for n in range(cute.size(tCgC, mode=[2])):
        cute.copy(copy_c, tCrO[None, None, n], tCgC[None, None, n], pred=tCpC[None, None, n])


@cute.jit
def _gemm(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, mPart: cute.Tensor):
    tiled_mma = cute.make_tiled_mma(
        cute.nvgpu.warp.MmaF16BF16Op(cutlass.BFloat16, cutlass.Float32, (16, 8, 16)),
        cute.make_layout((WARPS_M, WARPS_N, 1)),
        permutation_mnk=(WARPS_M * 16, WARPS_N * 8 * 2, 16),
    )
    copy_ab = _gmem_copy(
        cute.make_copy_atom(
            cute.nvgpu.cpasync.CopyG2SOp(cache_mode=cute.nvgpu.LoadCacheMode.GLOBAL),
            cutlass.BFloat16,
            num_bits_per_copy=COPY_BITS,
        ),
        BK,
    )
    copy_c = _gmem_copy(
        cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), cutlass.BFloat16, num_bits_per_copy=COPY_BITS), BN
    )
    grid_m = (cute.size(mA, mode=[0]) + BM - 1) // BM
    _gemm_kernel(mA, mB, mC, mPart, tiled_mma, copy_ab, copy_c).launch(
        grid=[grid_m, NBLK, SIDE], block=[THREADS, 1, 1], min_blocks_per_mp=2, preferred_smem_carveout=100
    )


@cute.kernel
def _collapse_kernel(mH0: cute.Tensor, mP: cute.Tensor, mPart: cute.Tensor, mO: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    tok, _, _ = cute.arch.block_idx()
    smem = SmemAllocator()
    sRed = smem.allocate_tensor(cutlass.Float32, cute.make_layout((COL_THREADS // 32,)), byte_alignment=16)
    gH = cute.zipped_divide(mH0, (1, VEC))  # ((1,8), (tokens, 256))
    gP = cute.zipped_divide(mP, (1, VEC, 1))  # ((1,8,1), (tokens, 256, 3))
    gO = cute.zipped_divide(mO, (1, VEC))
    hv = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    pv = cute.make_rmem_tensor((VEC, SIDE), cutlass.BFloat16)
    cute.autovec_copy(gH[(0, None), (tok, tidx)], hv)
    for i in cutlass.range_constexpr(SIDE):
        cute.autovec_copy(gP[(0, None, 0), (tok, tidx, i)], pv[None, i])
    h = hv.load().to(cutlass.Float32)
    ss = (h * h).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), reduction_profile=0)
    for s in cutlass.range_constexpr(5):
        ss = ss + cute.arch.shuffle_sync_bfly(ss, offset=16 >> s)
    if tidx % 32 == 0:
        sRed[tidx // 32] = ss
    cute.arch.sync_threads()
    tot = cutlass.Float32(0.0)
    for w in cutlass.range_constexpr(COL_THREADS // 32):
        tot = tot + sRed[w]
    target = cute.math.sqrt(tot * cutlass.Float32(1.0 / D))
    acc = cute.make_rmem_tensor((VEC,), cutlass.Float32)
    acc.fill(0.0)
    for i in cutlass.range_constexpr(SIDE):
        s_i = cutlass.Float32(0.0)
        for b in cutlass.range_constexpr(NBLK):
            s_i = s_i + mPart[tok, b, i]
        scale = target / cute.math.sqrt(cute.arch.fmax(s_i * cutlass.Float32(1.0 / D), cutlass.Float32(EPS)))
        acc.store(acc.load() + pv[None, i].load().to(cutlass.Float32) * scale)
    ov = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    ov.store(((h + acc.load()) * cutlass.Float32(0.25)).to(cutlass.BFloat16))
    cute.autovec_copy(ov, gO[(0, None), (tok, tidx)])


@cute.jit
def _collapse(mH0: cute.Tensor, mP: cute.Tensor, mPart: cute.Tensor, mO: cute.Tensor):
    _collapse_kernel(mH0, mP, mPart, mO).launch(grid=[cute.size(mH0, mode=[0]), 1, 1], block=[COL_THREADS, 1, 1])


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        tokens = cute.sym_int()
        bf16 = cutlass.BFloat16
        # (rows, K, side) with the side stream outermost: views of [side, rows, K] tensors
        a = make_fake_compact_tensor(bf16, (tokens, D, SIDE), stride_order=(1, 0, 2), assumed_align=16)
        b = make_fake_compact_tensor(bf16, (D, D, SIDE), stride_order=(1, 0, 2), assumed_align=16)
        c = make_fake_compact_tensor(bf16, (tokens, D, SIDE), stride_order=(1, 0, 2), assumed_align=16)
        part = make_fake_compact_tensor(cutlass.Float32, (tokens, NBLK, SIDE), stride_order=(1, 0, 2), assumed_align=16)
        h0 = make_fake_compact_tensor(bf16, (tokens, D), stride_order=(1, 0), assumed_align=16)
        opts = "--enable-tvm-ffi"
        _COMPILED.append(cute.compile(_gemm, a, b, c, part, options=opts))
        _COMPILED.append(cute.compile(_collapse, h0, c, part, h0, options=opts))
    return _COMPILED


def run(hidden_states: torch.Tensor, unembed_weight: torch.Tensor) -> torch.Tensor:
    gemm, collapse = _compiled()
    h = hidden_states.contiguous()
    tokens = h.shape[1]
    p = torch.empty((SIDE, tokens, D), dtype=torch.bfloat16, device=h.device)
    part = torch.empty((SIDE, tokens, NBLK), dtype=torch.float32, device=h.device)
    # [side, rows, K] -> (rows, K, side) views: the batched GEMM's L mode is the side stream
    gemm(h[1:].permute(1, 2, 0), unembed_weight.contiguous().permute(1, 2, 0), p.permute(1, 2, 0),
         part.permute(1, 2, 0))  # fmt: skip
    out = torch.empty((tokens, D), dtype=torch.bfloat16, device=h.device)
    collapse(h[0], p.permute(1, 2, 0), part.permute(1, 2, 0), out)
    return out
