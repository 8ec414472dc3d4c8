"""Hopper tensor-core GEMM building blocks in TIRx, shared by the moe and quantization reference kernels.

C[m, n] = sum_k A[m, k] * B[n, k] with both operands K-major (row-major [rows, K] in global memory),
bf16 or fp8 e4m3, float32 accumulation on WGMMA (sm_90a). DESIGN §5 (reference kernels).

One CTA = two warpgroups (256 threads) owning a BM = 128-row x BN-column tile; warpgroup w owns rows
64w .. 64w + 63 and issues m64 x BN WGMMAs (`split_n`: 64 rows shared by both warpgroups, each on
its half of the B rows). The K loop steps one k-tile of 128 bytes per row (64 bf16 or 128 fp8 =
exactly one 128-wide fp8 scale block): every thread issues 16-byte asynchronous copies of the A and
B tiles into a STAGES-deep ring in dynamic shared memory, laid out as WGMMA's 128-byte-swizzle K-major
canonical layout (row r at byte 128 r, its 16-byte chunk c at position c ^ (r % 8); the ring is
1024-byte aligned so the hardware's address-bit swizzle agrees). Iteration kt waits for its own
copies, makes them visible to the async proxy (proxy fence) and meets the CTA barrier, then refills
the slot consumed at kt - 1 (every warpgroup has waited for its WGMMAs of kt - 1 before that
barrier), then issues the k-tile's four WGMMAs (K = 16 bf16 or 32 fp8 each, the descriptor's start
address advanced 32 bytes per step inside the swizzle atom) and waits for them.

fp8 block scales (DeepGEMM style): each k-tile's WGMMAs accumulate into a fresh temporary, which is
then promoted into the float32 accumulator as acc += tmp * scale(row, kt) on the CUDA cores. This
keeps every tensor-core accumulation chain at 128 products (Hopper's fp8 MMA accumulates with ~14
mantissa bits) and applies the per-block scales exactly once.

Accumulator fragment (PTX ISA, the WGMMA D layout of m64nNk*): thread t of warpgroup w holds, for
j < N / 8, i < 2, c < 2, register 4j + 2i + c = element (row 64w + 16 (t // 32 % 4) + (t % 32) // 4 + 8i,
column 8j + 2 (t % 4) + c).
"""

from __future__ import annotations

from typing import Any

from tvm.script import tirx as T

THREADS = 256
WG_THREADS = 128
BM = 128
ROW_BYTES = 128  # one k-tile row: one 128-byte swizzle atom row
CHUNK = 16  # bytes per cp.async
CHUNKS_PER_ROW = ROW_BYTES // CHUNK
A_TILE_BYTES = BM * ROW_BYTES
WG_A_BYTES = 64 * ROW_BYTES  # the 64 rows of one warpgroup
K_STEPS = 4  # WGMMAs per k-tile (32 bytes of K each)
SMEM_BUDGET = 200 * 1024  # dynamic shared memory for the ring (H200: 227 KiB per CTA)
# sm_90 matrix descriptor: layout 128-byte swizzle (bits 62-63 = 1), stride byte offset 1024 B between
# 8-row core-matrix groups (bits 32-45, in 16-byte units), leading byte offset 16 B (unused when swizzled)
DESC_SW128 = (1 << 62) | ((1024 // 16) << 32) | (1 << 16)


def elem_bytes(dtype: str) -> int:
    return {"bfloat16": 2, "float8_e4m3fn": 1}[dtype]


def k_elems(dtype: str) -> int:
    """Elements of one k-tile row (128 bytes)."""
    return ROW_BYTES // elem_bytes(dtype)


def stages_for(bn: int, a_rows: int = BM) -> int:
    """Deepest ring that fits the shared-memory budget (at least 3)."""
    stages = SMEM_BUDGET // ((a_rows + bn) * ROW_BYTES)
    if stages < 3:
        raise ValueError(f"BN={bn}: fewer than 3 stages fit in shared memory")
    return stages


def raster(t: Any, m_tiles: int, n_tiles: int, group: int = 8) -> tuple[Any, Any]:
    """(m tile, n tile) of linear tile t, walking `group` m-tiles at a time across all n-tiles.

    Consecutive CTAs share one B tile (and a band of `group` A tiles stays in L2), so the weight is
    read from HBM about m_tiles / group times instead of m_tiles times.
    """
    band = group * n_tiles
    first = t // band * group
    size = T.min(m_tiles - first, group)
    return first + t % band % size, t % band // size


def frag_row(tx: Any, i: int) -> Any:
    """CTA-tile row of accumulator half i (rows r and r + 8) of thread tx."""
    return tx // WG_THREADS * 64 + tx % WG_THREADS // 32 * 16 + tx % 32 // 4 + 8 * i


def frag_col(tx: Any, j: int, c: int) -> Any:
    """Tile column of accumulator register 4j + 2i + c of thread tx."""
    return 8 * j + 2 * (tx % 4) + c


MMA_SHAPES = (("bfloat16", 128), ("bfloat16", 256), ("float8_e4m3fn", 128))


def mma_n(dtype: str, n: int) -> int:
    """N of a WGMMA the `wgmma` macro spells out (bf16 m64n128k16 / m64n256k16, fp8 m64n128k32)."""
    if (dtype, n) not in MMA_SHAPES:
        raise ValueError(f"no WGMMA shape for {dtype} N={n}")
    return n


@T.macro
def wgmma(dtype, n, d, da, db, scale_d):
    """One asynchronous warpgroup MMA m64 x n x (16 bf16 | 32 fp8) into registers d (float32)."""
    if dtype == "bfloat16":
        if n == 256:
            T.ptx.wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16(
                *[d[i] for i in range(n // 2)], da, db, scale_d, 1, 1, 0, 0
            )
        else:
            T.ptx.wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16(
                *[d[i] for i in range(n // 2)], da, db, scale_d, 1, 1, 0, 0
            )
    else:
        T.ptx.wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3(
            *[d[i] for i in range(n // 2)], da, db, scale_d, 1, 1
        )


@T.macro
def load_rows(pool, base, rows, src, kt, tx, alt=None, use_alt=None):
    """cp.async `rows` rows of k-tile kt (128 B each) into the swizzled tile at byte `base` of `pool`.

    `src(kt, r, chunk)` is the global address of row r's 16-byte chunk `chunk` in k-tile kt; with `alt`
    given, `alt` supplies the addresses instead wherever the (CTA-uniform) `use_alt` holds.
    """
    for i in T.unroll(rows * CHUNKS_PER_ROW // THREADS):
        r = T.meta_var(tx // CHUNKS_PER_ROW + i * (THREADS // CHUNKS_PER_ROW))
        ch = T.meta_var(tx % CHUNKS_PER_ROW)
        dst = T.meta_var(pool.ptr_to([base + r * ROW_BYTES + T.bitwise_xor(ch, r % 8) * CHUNK]))
        if alt is None:
            T.ptx.cp.async_.cg.shared.global_(dst, src(kt, r, ch), CHUNK)
        elif use_alt:
            T.ptx.cp.async_.cg.shared.global_(dst, alt(kt, r, ch), CHUNK)
        else:
            T.ptx.cp.async_.cg.shared.global_(dst, src(kt, r, ch), CHUNK)


@T.macro
def mainloop(
    pool, acc, tmp, tx, k_tiles, bn, dtype, a_src, b_src, scale, b_alt=None, use_b_alt=None, split_n=False
):
    """The pipelined K loop of one CTA tile into `acc` (float32 registers).

    a_src(kt, r, chunk) / b_src(kt, r, chunk): global addresses of row r's chunk of k-tile kt of A
    (r < 128) and B (r < bn); `b_alt` replaces b_src where the CTA-uniform `use_b_alt` holds (a second
    weight tensor). With `tmp` given (fp8), every k-tile accumulates into tmp and
    `scale(kt, i)` (the factor of accumulator half i, rows frag_row(tx, i)) promotes it into acc;
    with tmp None, the WGMMAs accumulate into acc directly.
    Default tile: 128 A rows, warpgroup w takes rows 64w.. against all bn B rows (bn / 2 registers).
    `split_n`: 64 A rows shared by both warpgroups, warpgroup w takes B rows w bn/2 .. (w + 1) bn/2
    (bn / 4 registers; rows split_frag_row, columns frag_col within the warpgroup's half).
    """
    a_rows = T.meta_var(BM // 2 if split_n else BM)
    a_bytes = T.meta_var(a_rows * ROW_BYTES)
    stages = T.meta_var(stages_for(bn, a_rows))
    stage_bytes = T.meta_var((a_rows + bn) * ROW_BYTES)
    wg = T.meta_var(tx // WG_THREADS)
    nreg = T.meta_var(bn // 4 if split_n else bn // 2)
    n_mma = T.meta_var(mma_n(dtype, bn // 2 if split_n else bn))
    a_off = T.meta_var(0 if split_n else wg * WG_A_BYTES)
    b_off = T.meta_var(wg * (bn // 2) * ROW_BYTES if split_n else 0)
    smem: T.uint32 = T.cuda.cvta_generic_to_shared(pool.ptr_to([0]))
    desc0: T.uint64 = T.uint64(DESC_SW128) | T.Cast("uint64", T.shift_right(smem, T.uint32(4)))
    for i in T.unroll(nreg):
        acc[i] = T.float32(0)
    for s in T.unroll(stages - 1):
        if s < k_tiles:
            load_rows(pool, s * stage_bytes, a_rows, a_src, s, tx)
            load_rows(pool, s * stage_bytes + a_bytes, bn, b_src, s, tx, b_alt, use_b_alt)
        T.ptx.cp.async_.commit_group()
    for kt in T.serial(k_tiles):
        T.ptx.cp.async_.wait_group(stages - 2)
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        nxt = T.meta_var(kt + stages - 1)
        if nxt < k_tiles:
            load_rows(pool, nxt % stages * stage_bytes, a_rows, a_src, nxt, tx)
            load_rows(pool, nxt % stages * stage_bytes + a_bytes, bn, b_src, nxt, tx, b_alt, use_b_alt)
        T.ptx.cp.async_.commit_group()
        slot = T.meta_var(kt % stages * stage_bytes)
        da: T.uint64 = desc0 + T.Cast("uint64", T.shift_right(slot + a_off, 4))
        db: T.uint64 = desc0 + T.Cast("uint64", T.shift_right(slot + a_bytes + b_off, 4))
        if tmp is None:
            T.ptx.wgmma.fence.sync.aligned()
            for s in T.unroll(K_STEPS):
                wgmma(dtype, n_mma, acc, da + T.uint64(2 * s), db + T.uint64(2 * s), True)
            T.ptx.wgmma.commit_group.sync.aligned()
            T.ptx.wgmma.wait_group.sync.aligned(0)
        else:
            f0: T.f32 = scale(kt, 0)
            f1: T.f32 = scale(kt, 1)
            T.ptx.wgmma.fence.sync.aligned()
            for s in T.unroll(K_STEPS):
                wgmma(dtype, n_mma, tmp, da + T.uint64(2 * s), db + T.uint64(2 * s), s > 0)
            T.ptx.wgmma.commit_group.sync.aligned()
            T.ptx.wgmma.wait_group.sync.aligned(0)
            # the promotion is PTX fma (volatile asm): it cannot move above the wait, so it reads the
            # temporaries only once the WGMMAs have written them (CUTLASS fences the operands instead)
            for j in T.unroll(nreg // 4):
                for h in T.unroll(2):
                    for c in T.unroll(2):
                        T.ptx.fma.rn.f32(
                            acc[4 * j + 2 * h + c],
                            tmp[4 * j + 2 * h + c],
                            T.Select(h == 0, f0, f1),
                            acc[4 * j + 2 * h + c],
                        )
    T.ptx.cp.async_.wait_group(0)
    if tmp is None:
        # the epilogue reads the accumulators through a volatile fma after the last wait (as above)
        for i in T.unroll(nreg):
            T.ptx.fma.rn.f32(acc[i], acc[i], T.float32(1), T.float32(0))


def smem_bytes(bn: int, a_rows: int = BM) -> int:
    return stages_for(bn, a_rows) * (a_rows + bn) * ROW_BYTES


def split_frag_row(tx: Any, i: int) -> Any:
    """Tile row of accumulator half i of thread tx in a `split_n` tile (both warpgroups on rows 0..63)."""
    return tx % WG_THREADS // 32 * 16 + tx % 32 // 4 + 8 * i


GROUP = 128  # fp8 activation quantisation group (one k-tile)
QUANT_VEC = 8  # bf16 per 16-byte load
QUANT_LANES = GROUP // QUANT_VEC  # threads per (token, group)
QUANT_THREADS = 256
FP8_MAX = 448.0
GROUP_EPS = 1e-10


def act_quant(tokens: int, k: int, *, ue8m0: bool = False) -> Any:
    """Dynamic per-token-group fp8 quantisation: X [tokens, k] bf16 -> Q [tokens, k] fp8 (as uint8 bytes),
    S [k / 128, tokens] float32 (block-major, so a GEMM k-tile reads its rows' scales contiguously).

    A half-warp owns one (token, group): 16 lanes x 8 bf16 (one 16-byte load each), amax reduced with
    butterfly shuffles; s = max(amax, 1e-10) / 448 (rounded up to a power of two with `ue8m0`, exactly:
    2^ceil(log2 v) from the float bits); q = fp8_e4m3(clamp(x / s, +-448)) round to nearest even.
    """
    groups = tokens * (k // GROUP)
    grid = (groups + QUANT_THREADS // QUANT_LANES - 1) // (QUANT_THREADS // QUANT_LANES)
    per_cta = QUANT_THREADS // QUANT_LANES

    @T.prim_func
    def quant(x_ptr: T.handle, q_ptr: T.handle, s_ptr: T.handle):
        X = T.match_buffer(x_ptr, (groups, GROUP), "bfloat16")
        Q = T.match_buffer(q_ptr, (groups, GROUP), "float8_e4m3fn")
        S = T.match_buffer(s_ptr, (k // GROUP, tokens), "float32")
        T.device_entry()
        bx = T.cta_id([grid])
        tx = T.thread_id([QUANT_THREADS])
        grp = T.meta_var(bx * per_cta + tx // QUANT_LANES)
        col = T.meta_var(tx % QUANT_LANES * QUANT_VEC)
        xv = T.alloc_local((QUANT_VEC,), "bfloat16")
        qv = T.alloc_local((QUANT_VEC,), "float8_e4m3fn")
        if grp < groups:
            for i in T.vectorized(QUANT_VEC):
                xv[i] = X[grp, col + i]
        else:
            for i in T.vectorized(QUANT_VEC):
                xv[i] = T.bfloat16(0)
        amax: T.f32 = T.float32(0)
        for i in T.unroll(QUANT_VEC):
            amax = T.max(amax, T.abs(T.Cast("float32", xv[i])))
        # every lane shuffles (out-of-range groups carry zeros), so full-mask shuffles are safe
        amax = T.cuda.warp_max(amax, width=QUANT_LANES)
        scale: T.f32 = T.max(amax, T.float32(GROUP_EPS)) / T.float32(FP8_MAX)
        if ue8m0:
            # 2^ceil(log2 s): keep the exponent, add one unless the mantissa is zero
            bits: T.int32 = T.reinterpret("int32", scale)
            up: T.int32 = T.Select(T.bitwise_and(bits, 0x7FFFFF) != 0, 1, 0)
            scale = T.reinterpret("float32", T.shift_left(T.shift_right(bits, 23) + up, 23))
        for i in T.unroll(QUANT_VEC):
            y: T.f32 = T.min(T.max(T.Cast("float32", xv[i]) / scale, T.float32(-FP8_MAX)), T.float32(FP8_MAX))
            qv[i] = T.Cast("float8_e4m3fn", y)
        if grp < groups:
            for i in T.vectorized(QUANT_VEC):
                Q[grp, col + i] = qv[i]
            if tx % QUANT_LANES == 0:
                S[grp % (k // GROUP), grp // (k // GROUP)] = scale

    return quant


FP8_BN = 128  # block-FP8 GEMM column tile: exactly one 128-row weight scale block


def clamped_row(row: Any, rows: int, tile: int) -> Any:
    """`row` clamped to the last of `rows` (needed only when `rows` is not a multiple of the tile)."""
    return row if rows % tile == 0 else T.min(row, rows - 1)


@T.macro
def block_fp8_mainloop(pool, acc, tmp, tx, A, B, SA, SB, rows, cols, m0, nt, k_tiles):
    """`mainloop` of a W8A8 block-FP8 GEMM tile (FP8_BN columns): A [rows, K] fp8 codes with scales
    SA [K / 128, rows], B [cols, K] fp8 with 128 x 128 block scales SB [ceil(cols / 128), K / 128]; rows
    past `rows` (columns past `cols`) read the last one, and their results are never stored."""
    mainloop(
        pool,
        acc,
        tmp,
        tx,
        k_tiles,
        FP8_BN,
        "float8_e4m3fn",
        lambda kt, r, ch: A.ptr_to([clamped_row(m0 + r, rows, BM), kt * GROUP + ch * CHUNK]),
        lambda kt, r, ch: B.ptr_to([clamped_row(nt * FP8_BN + r, cols, FP8_BN), kt * GROUP + ch * CHUNK]),
        lambda kt, i: SA[kt, T.min(m0 + frag_row(tx, i), rows - 1)] * SB[nt, kt],
    )
