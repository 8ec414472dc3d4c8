"""p48 top10_shared_gate_qwen3next_bf16 — plan `fused`, TIRx: route kernel + grouped-GEMM pipeline.

Plan: (1) route: one warp per token, lane l owns experts 32 i + l (i < 16, coalesced bf16 loads); 10
rounds of a warp argmax on the logits (the softmax is monotone; ties to the lower id) pick the experts,
and their weights are exp(l - l_max) / sum over the 10 of exp(l_j - l_max) (the softmax denominator
cancels in p / sum p). Lane 0 records each chosen expert that is local with its weight and its rank
among the expert's rows (atomicAdd on the expert's count), -1 otherwise. The same warp forms the shared
gate sigmoid(w_gate . x) (8 bf16 x 8 loads per lane, butterfly sum). (2) The grouped-GEMM pipeline of
`_moe_tirx.py`: scan -> scatter of the hidden rows into 128-row expert tiles (the shared expert is one
more segment over all tokens, its rows weighted by the shared gate) -> GEMM1 (m64n256 bf16 WGMMAs: 128
gate + 128 up rows per tile, SwiGLU in the epilogue) -> GEMM2 (m64n256 WGMMAs, row weight in the
epilogue) -> combine (float32 sum of the token's rows, one bf16 rounding). Compiled once per shape.
"""

from types import SimpleNamespace
from typing import Any

import torch
import tvm
from tvm.script import tirx as T

# bundle: problems/_wgmma_tirx.py as W
# bundle: problems/moe/solutions/_moe_tirx.py as M

# ---- bundled shared kernel code (python -m problems._bundle; edit the source modules) ----

# problems/_wgmma_tirx.py
_W_THREADS = 256
_W_WG_THREADS = 128
_W_BM = 128
_W_ROW_BYTES = 128  # one k-tile row: one 128-byte swizzle atom row
_W_CHUNK = 16  # bytes per cp.async
_W_CHUNKS_PER_ROW = _W_ROW_BYTES // _W_CHUNK
_W_A_TILE_BYTES = _W_BM * _W_ROW_BYTES
_W_WG_A_BYTES = 64 * _W_ROW_BYTES  # the 64 rows of one warpgroup
_W_K_STEPS = 4  # WGMMAs per k-tile (32 bytes of K each)
_W_SMEM_BUDGET = 200 * 1024  # dynamic shared memory for the ring (H200: 227 KiB per CTA)
# sm_90 matrix descriptor: layout 128-byte swizzle (bits 62-63 = 1), stride byte offset 1024 B between
# 8-row core-matrix groups (bits 32-45, in 16-byte units), leading byte offset 16 B (unused when swizzled)
_W_DESC_SW128 = (1 << 62) | ((1024 // 16) << 32) | (1 << 16)


def _W_elem_bytes(dtype: str) -> int:
    return {"bfloat16": 2, "float8_e4m3fn": 1}[dtype]


def _W_k_elems(dtype: str) -> int:
    """Elements of one k-tile row (128 bytes)."""
    return _W_ROW_BYTES // _W_elem_bytes(dtype)


def _W_stages_for(bn: int, a_rows: int = _W_BM) -> int:
    """Deepest ring that fits the shared-memory budget (at least 3)."""
    stages = _W_SMEM_BUDGET // ((a_rows + bn) * _W_ROW_BYTES)
    if stages < 3:
        raise ValueError(f"BN={bn}: fewer than 3 stages fit in shared memory")
    return stages


def _W_raster(t: Any, m_tiles: int, n_tiles: int, group: int = 8) -> tuple[Any, Any]:
    """(m tile, n tile) of linear tile t, walking `group` m-tiles at a time across all n-tiles.

    Consecutive CTAs share one B tile (and a band of `group` A tiles stays in L2), so the weight is
    read from HBM about m_tiles / group times instead of m_tiles times.
    """
    band = group * n_tiles
    first = t // band * group
    size = T.min(m_tiles - first, group)
    return first + t % band % size, t % band // size


def _W_frag_row(tx: Any, i: int) -> Any:
    """CTA-tile row of accumulator half i (rows r and r + 8) of thread tx."""
    return tx // _W_WG_THREADS * 64 + tx % _W_WG_THREADS // 32 * 16 + tx % 32 // 4 + 8 * i


def _W_frag_col(tx: Any, j: int, c: int) -> Any:
    """Tile column of accumulator register 4j + 2i + c of thread tx."""
    return 8 * j + 2 * (tx % 4) + c


_W_MMA_SHAPES = (("bfloat16", 128), ("bfloat16", 256), ("float8_e4m3fn", 128))


def _W_mma_n(dtype: str, n: int) -> int:
    """N of a WGMMA the `wgmma` macro spells out (bf16 m64n128k16 / m64n256k16, fp8 m64n128k32)."""
    if (dtype, n) not in _W_MMA_SHAPES:
        raise ValueError(f"no WGMMA shape for {dtype} N={n}")
    return n


@T.macro
def _W_wgmma(dtype, n, d, da, db, scale_d):
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
def _W_load_rows(pool, base, rows, src, kt, tx, alt=None, use_alt=None):
    """cp.async `rows` rows of k-tile kt (128 B each) into the swizzled tile at byte `base` of `pool`.

    `src(kt, r, chunk)` is the global address of row r's 16-byte chunk `chunk` in k-tile kt; with `alt`
    given, `alt` supplies the addresses instead wherever the (CTA-uniform) `use_alt` holds.
    """
    for i in T.unroll(rows * _W_CHUNKS_PER_ROW // _W_THREADS):
        r = T.meta_var(tx // _W_CHUNKS_PER_ROW + i * (_W_THREADS // _W_CHUNKS_PER_ROW))
        ch = T.meta_var(tx % _W_CHUNKS_PER_ROW)
        dst = T.meta_var(pool.ptr_to([base + r * _W_ROW_BYTES + T.bitwise_xor(ch, r % 8) * _W_CHUNK]))
        if alt is None:
            T.ptx.cp.async_.cg.shared.global_(dst, src(kt, r, ch), _W_CHUNK)
        elif use_alt:
            T.ptx.cp.async_.cg.shared.global_(dst, alt(kt, r, ch), _W_CHUNK)
        else:
            T.ptx.cp.async_.cg.shared.global_(dst, src(kt, r, ch), _W_CHUNK)


@T.macro
def _W_mainloop(pool, acc, tmp, tx, k_tiles, bn, dtype, a_src, b_src, scale, b_alt=None, use_b_alt=None, split_n=False):
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
    a_rows = T.meta_var(_W_BM // 2 if split_n else _W_BM)
    a_bytes = T.meta_var(a_rows * _W_ROW_BYTES)
    stages = T.meta_var(_W_stages_for(bn, a_rows))
    stage_bytes = T.meta_var((a_rows + bn) * _W_ROW_BYTES)
    wg = T.meta_var(tx // _W_WG_THREADS)
    nreg = T.meta_var(bn // 4 if split_n else bn // 2)
    n_mma = T.meta_var(_W_mma_n(dtype, bn // 2 if split_n else bn))
    a_off = T.meta_var(0 if split_n else wg * _W_WG_A_BYTES)
    b_off = T.meta_var(wg * (bn // 2) * _W_ROW_BYTES if split_n else 0)
    smem: T.uint32 = T.cuda.cvta_generic_to_shared(pool.ptr_to([0]))
    desc0: T.uint64 = T.uint64(_W_DESC_SW128) | T.Cast("uint64", T.shift_right(smem, T.uint32(4)))
    for i in T.unroll(nreg):
        acc[i] = T.float32(0)
    for s in T.unroll(stages - 1):
        if s < k_tiles:
            _W_load_rows(pool, s * stage_bytes, a_rows, a_src, s, tx)
            _W_load_rows(pool, s * stage_bytes + a_bytes, bn, b_src, s, tx, b_alt, use_b_alt)
        T.ptx.cp.async_.commit_group()
    for kt in T.serial(k_tiles):
        T.ptx.cp.async_.wait_group(stages - 2)
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        nxt = T.meta_var(kt + stages - 1)
        if nxt < k_tiles:
            _W_load_rows(pool, nxt % stages * stage_bytes, a_rows, a_src, nxt, tx)
            _W_load_rows(pool, nxt % stages * stage_bytes + a_bytes, bn, b_src, nxt, tx, b_alt, use_b_alt)
        T.ptx.cp.async_.commit_group()
        slot = T.meta_var(kt % stages * stage_bytes)
        da: T.uint64 = desc0 + T.Cast("uint64", T.shift_right(slot + a_off, 4))
        db: T.uint64 = desc0 + T.Cast("uint64", T.shift_right(slot + a_bytes + b_off, 4))
        if tmp is None:
            T.ptx.wgmma.fence.sync.aligned()
            for s in T.unroll(_W_K_STEPS):
                _W_wgmma(dtype, n_mma, acc, da + T.uint64(2 * s), db + T.uint64(2 * s), True)
            T.ptx.wgmma.commit_group.sync.aligned()
            T.ptx.wgmma.wait_group.sync.aligned(0)
        else:
            f0: T.f32 = scale(kt, 0)
            f1: T.f32 = scale(kt, 1)
            T.ptx.wgmma.fence.sync.aligned()
            for s in T.unroll(_W_K_STEPS):
                _W_wgmma(dtype, n_mma, tmp, da + T.uint64(2 * s), db + T.uint64(2 * s), s > 0)
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


def _W_smem_bytes(bn: int, a_rows: int = _W_BM) -> int:
    return _W_stages_for(bn, a_rows) * (a_rows + bn) * _W_ROW_BYTES


def _W_split_frag_row(tx: Any, i: int) -> Any:
    """Tile row of accumulator half i of thread tx in a `split_n` tile (both warpgroups on rows 0..63)."""
    return tx % _W_WG_THREADS // 32 * 16 + tx % 32 // 4 + 8 * i


_W_GROUP = 128  # fp8 activation quantisation group (one k-tile)
_W_QUANT_VEC = 8  # bf16 per 16-byte load
_W_QUANT_LANES = _W_GROUP // _W_QUANT_VEC  # threads per (token, group)
_W_QUANT_THREADS = 256
_W_FP8_MAX = 448.0
_W_GROUP_EPS = 1e-10


def _W_act_quant(tokens: int, k: int, *, ue8m0: bool = False) -> Any:
    """Dynamic per-token-group fp8 quantisation: X [tokens, k] bf16 -> Q [tokens, k] fp8 (as uint8 bytes),
    S [k / 128, tokens] float32 (block-major, so a GEMM k-tile reads its rows' scales contiguously).

    A half-warp owns one (token, group): 16 lanes x 8 bf16 (one 16-byte load each), amax reduced with
    butterfly shuffles; s = max(amax, 1e-10) / 448 (rounded up to a power of two with `ue8m0`, exactly:
    2^ceil(log2 v) from the float bits); q = fp8_e4m3(clamp(x / s, +-448)) round to nearest even.
    """
    groups = tokens * (k // _W_GROUP)
    grid = (groups + _W_QUANT_THREADS // _W_QUANT_LANES - 1) // (_W_QUANT_THREADS // _W_QUANT_LANES)
    per_cta = _W_QUANT_THREADS // _W_QUANT_LANES

    @T.prim_func
    def quant(x_ptr: T.handle, q_ptr: T.handle, s_ptr: T.handle):
        X = T.match_buffer(x_ptr, (groups, _W_GROUP), "bfloat16")
        Q = T.match_buffer(q_ptr, (groups, _W_GROUP), "float8_e4m3fn")
        S = T.match_buffer(s_ptr, (k // _W_GROUP, tokens), "float32")
        T.device_entry()
        bx = T.cta_id([grid])
        tx = T.thread_id([_W_QUANT_THREADS])
        grp = T.meta_var(bx * per_cta + tx // _W_QUANT_LANES)
        col = T.meta_var(tx % _W_QUANT_LANES * _W_QUANT_VEC)
        xv = T.alloc_local((_W_QUANT_VEC,), "bfloat16")
        qv = T.alloc_local((_W_QUANT_VEC,), "float8_e4m3fn")
        if grp < groups:
            for i in T.vectorized(_W_QUANT_VEC):
                xv[i] = X[grp, col + i]
        else:
            for i in T.vectorized(_W_QUANT_VEC):
                xv[i] = T.bfloat16(0)
        amax: T.f32 = T.float32(0)
        for i in T.unroll(_W_QUANT_VEC):
            amax = T.max(amax, T.abs(T.Cast("float32", xv[i])))
        # every lane shuffles (out-of-range groups carry zeros), so full-mask shuffles are safe
        amax = T.cuda.warp_max(amax, width=_W_QUANT_LANES)
        scale: T.f32 = T.max(amax, T.float32(_W_GROUP_EPS)) / T.float32(_W_FP8_MAX)
        if ue8m0:
            # 2^ceil(log2 s): keep the exponent, add one unless the mantissa is zero
            bits: T.int32 = T.reinterpret("int32", scale)
            up: T.int32 = T.Select(T.bitwise_and(bits, 0x7FFFFF) != 0, 1, 0)
            scale = T.reinterpret("float32", T.shift_left(T.shift_right(bits, 23) + up, 23))
        for i in T.unroll(_W_QUANT_VEC):
            y: T.f32 = T.min(T.max(T.Cast("float32", xv[i]) / scale, T.float32(-_W_FP8_MAX)), T.float32(_W_FP8_MAX))
            qv[i] = T.Cast("float8_e4m3fn", y)
        if grp < groups:
            for i in T.vectorized(_W_QUANT_VEC):
                Q[grp, col + i] = qv[i]
            if tx % _W_QUANT_LANES == 0:
                S[grp % (k // _W_GROUP), grp // (k // _W_GROUP)] = scale

    return quant


_W_FP8_BN = 128  # block-FP8 GEMM column tile: exactly one 128-row weight scale block


def _W_clamped_row(row: Any, rows: int, tile: int) -> Any:
    """`row` clamped to the last of `rows` (needed only when `rows` is not a multiple of the tile)."""
    return row if rows % tile == 0 else T.min(row, rows - 1)


@T.macro
def _W_block_fp8_mainloop(pool, acc, tmp, tx, A, B, SA, SB, rows, cols, m0, nt, k_tiles):
    """`mainloop` of a W8A8 block-FP8 GEMM tile (FP8_BN columns): A [rows, K] fp8 codes with scales
    SA [K / 128, rows], B [cols, K] fp8 with 128 x 128 block scales SB [ceil(cols / 128), K / 128]; rows
    past `rows` (columns past `cols`) read the last one, and their results are never stored."""
    _W_mainloop(
        pool,
        acc,
        tmp,
        tx,
        k_tiles,
        _W_FP8_BN,
        "float8_e4m3fn",
        lambda kt, r, ch: A.ptr_to([_W_clamped_row(m0 + r, rows, _W_BM), kt * _W_GROUP + ch * _W_CHUNK]),
        lambda kt, r, ch: B.ptr_to(
            [_W_clamped_row(nt * _W_FP8_BN + r, cols, _W_FP8_BN), kt * _W_GROUP + ch * _W_CHUNK]
        ),
        lambda kt, i: SA[kt, T.min(m0 + _W_frag_row(tx, i), rows - 1)] * SB[nt, kt],
    )


W = SimpleNamespace(
    THREADS=_W_THREADS,
    WG_THREADS=_W_WG_THREADS,
    BM=_W_BM,
    ROW_BYTES=_W_ROW_BYTES,
    CHUNK=_W_CHUNK,
    CHUNKS_PER_ROW=_W_CHUNKS_PER_ROW,
    A_TILE_BYTES=_W_A_TILE_BYTES,
    WG_A_BYTES=_W_WG_A_BYTES,
    K_STEPS=_W_K_STEPS,
    SMEM_BUDGET=_W_SMEM_BUDGET,
    DESC_SW128=_W_DESC_SW128,
    elem_bytes=_W_elem_bytes,
    k_elems=_W_k_elems,
    stages_for=_W_stages_for,
    raster=_W_raster,
    frag_row=_W_frag_row,
    frag_col=_W_frag_col,
    MMA_SHAPES=_W_MMA_SHAPES,
    mma_n=_W_mma_n,
    wgmma=_W_wgmma,
    load_rows=_W_load_rows,
    mainloop=_W_mainloop,
    smem_bytes=_W_smem_bytes,
    split_frag_row=_W_split_frag_row,
    GROUP=_W_GROUP,
    QUANT_VEC=_W_QUANT_VEC,
    QUANT_LANES=_W_QUANT_LANES,
    QUANT_THREADS=_W_QUANT_THREADS,
    FP8_MAX=_W_FP8_MAX,
    GROUP_EPS=_W_GROUP_EPS,
    act_quant=_W_act_quant,
    FP8_BN=_W_FP8_BN,
    clamped_row=_W_clamped_row,
    block_fp8_mainloop=_W_block_fp8_mainloop,
)


# problems/moe/solutions/_moe_tirx.py
_M_BM = W.BM
_M_GU_HALF = 128  # intermediate columns per GEMM1 tile (gate 128 + up 128 = one m64n256 WGMMA)
_M_BN2 = 256  # hidden columns per GEMM2 tile
_M_VEC = 8  # bf16 per 16-byte access
_M_THREADS = 256
_M_SMS = 132  # H200 streaming multiprocessors: the persistent GEMMs run one CTA per SM
_M_TARGET = {"kind": "cuda", "arch": "sm_90a"}


class _M_MoeShape:
    """Static sizes of one compiled pipeline: tokens, hidden, inter (intermediate size of a routed expert
    and of each shared segment), local routed experts, top_k, shared segments (shared intermediate / inter).

    A plain class: a dataclass would generate its methods with exec(), which the verifier refuses in a
    submission."""

    def __init__(self, tokens: int, hidden: int, inter: int, local: int, top_k: int, shared: int) -> None:
        self.tokens, self.hidden, self.inter = tokens, hidden, inter
        self.local, self.top_k, self.shared = local, top_k, shared

    @property
    def segments(self) -> int:
        return self.local + self.shared

    @property
    def max_tiles(self) -> int:
        """Upper bound of 128-row tiles: every pair local, every expert segment ending in a partial tile."""
        pairs = self.tokens * min(self.top_k, self.local)
        return (pairs + _M_BM - 1) // _M_BM + self.local + self.shared * ((self.tokens + _M_BM - 1) // _M_BM)

    @property
    def rows(self) -> int:
        return self.max_tiles * _M_BM

    @property
    def token_slots(self) -> int:
        return self.top_k + self.shared


def _M_scan(s: _M_MoeShape) -> Any:
    """(counts [local]) -> block offsets [segments + 1], tile table [max_tiles]."""
    segs, maxt = s.segments, s.max_tiles
    fill = (maxt + _M_THREADS - 1) // _M_THREADS
    shared_blocks = (s.tokens + _M_BM - 1) // _M_BM

    @T.prim_func
    def moe_scan(cnt_ptr: T.handle, off_ptr: T.handle, tile_ptr: T.handle):
        CNT = T.match_buffer(cnt_ptr, (s.local,), "int32")
        OFF = T.match_buffer(off_ptr, (segs + 1,), "int32")
        TILE = T.match_buffer(tile_ptr, (maxt,), "int32")
        T.device_entry()
        _ = T.cta_id([1])
        tx = T.thread_id([_M_THREADS])
        soff = T.alloc_shared((segs + 1,), "int32")
        if tx == 0:
            run: T.int32 = 0
            for e in T.serial(segs):
                soff[e] = run
                OFF[e] = run
                run = run + T.Select(e < s.local, (CNT[T.min(e, s.local - 1)] + _M_BM - 1) // _M_BM, shared_blocks)
            soff[segs] = run
            OFF[segs] = run
        T.cuda.cta_sync()
        for it in T.serial(fill):
            blk = T.meta_var(it * _M_THREADS + tx)
            if blk < maxt:
                seg: T.int32 = -1
                for e in T.serial(segs):
                    if soff[e] <= blk and blk < soff[e + 1]:
                        seg = e
                TILE[blk] = seg

    return moe_scan


def _M_scatter(s: _M_MoeShape) -> Any:
    """Token rows into Xp; row weights; token_rows [T, top_k + shared] (-1 for non-local slots)."""
    chunks = s.hidden // _M_VEC
    per_thread = (chunks + _M_THREADS - 1) // _M_THREADS

    @T.prim_func
    def moe_scatter(
        x_ptr: T.handle,
        pe_ptr: T.handle,
        pw_ptr: T.handle,
        ps_ptr: T.handle,
        sg_ptr: T.handle,
        off_ptr: T.handle,
        xp_ptr: T.handle,
        rw_ptr: T.handle,
        tr_ptr: T.handle,
    ):
        X = T.match_buffer(x_ptr, (s.tokens, s.hidden), "bfloat16")
        PE = T.match_buffer(pe_ptr, (s.tokens, s.top_k), "int32")
        PW = T.match_buffer(pw_ptr, (s.tokens, s.top_k), "float32")
        PS = T.match_buffer(ps_ptr, (s.tokens, s.top_k), "int32")
        SG = T.match_buffer(sg_ptr, (s.tokens,), "float32")
        OFF = T.match_buffer(off_ptr, (s.segments + 1,), "int32")
        XP = T.match_buffer(xp_ptr, (s.rows, s.hidden), "bfloat16")
        RW = T.match_buffer(rw_ptr, (s.rows,), "float32")
        TR = T.match_buffer(tr_ptr, (s.tokens, s.token_slots), "int32")
        T.device_entry()
        t = T.cta_id([s.tokens])
        tx = T.thread_id([_M_THREADS])
        xv = T.alloc_local((per_thread, _M_VEC), "bfloat16")
        dst = T.alloc_local((s.token_slots,), "int32")
        for c in T.unroll(per_thread):
            if c * _M_THREADS + tx < chunks:
                for v in T.vectorized(_M_VEC):
                    xv[c, v] = X[t, (c * _M_THREADS + tx) * _M_VEC + v]
        for j in T.unroll(s.top_k):
            e: T.int32 = PE[t, j]
            dst[j] = T.Select(e >= 0, OFF[T.max(e, 0)] * _M_BM + PS[t, j], -1)
        for j in T.unroll(s.shared):
            dst[s.top_k + j] = OFF[s.local + j] * _M_BM + t
        for j in T.unroll(s.token_slots):
            if dst[j] >= 0:
                for c in T.unroll(per_thread):
                    if c * _M_THREADS + tx < chunks:
                        for v in T.vectorized(_M_VEC):
                            XP[dst[j], (c * _M_THREADS + tx) * _M_VEC + v] = xv[c, v]
        if tx < s.token_slots:
            TR[t, tx] = dst[tx]
            if dst[tx] >= 0:
                RW[dst[tx]] = T.Select(tx < s.top_k, PW[t, T.min(tx, s.top_k - 1)], SG[t])

    return moe_scatter


def _M__silu_mul(g: Any, u: Any) -> Any:
    return g / (T.float32(1) + T.exp(T.float32(0) - g)) * u


def _M_gemm1(s: _M_MoeShape) -> Any:
    """Act[r, n] = silu(Xp[r] . gate_e[n]) * (Xp[r] . up_e[n]) for the tile's segment e (persistent)."""
    k_tiles = s.hidden // W.k_elems("bfloat16")
    n_tiles = (s.inter + _M_GU_HALF - 1) // _M_GU_HALF
    ke = W.k_elems("bfloat16")
    si = s.shared * s.inter  # shared intermediate size

    def col(nt: Any, r: Any) -> Any:  # intermediate column of B row r (r % 128) of column tile nt
        return W.clamped_row(nt * _M_GU_HALF + r % _M_GU_HALF, s.inter, _M_GU_HALF)

    @T.macro
    def tile(t, blocks, TILE, pool, acc, tx, XP, W13, SW13, ACT):
        mt, nt = T.meta_var(W.raster(t, blocks, n_tiles))
        seg: T.int32 = TILE[mt]
        T.cuda.cta_sync()  # every warpgroup is done with the ring of the previous tile
        # B row r < 128: gate row nt * 128 + r; r >= 128: the matching up row
        W.mainloop(
            pool,
            acc,
            None,
            tx,
            k_tiles,
            2 * _M_GU_HALF,
            "bfloat16",
            lambda kt, r, ch: XP.ptr_to([mt * _M_BM + r, kt * ke + ch * _M_VEC]),
            lambda kt, r, ch: W13.ptr_to([seg, r // _M_GU_HALF * s.inter + col(nt, r), kt * ke + ch * _M_VEC]),
            None,
            lambda kt, r, ch: SW13.ptr_to(
                [r // _M_GU_HALF * si + (seg - s.local) * s.inter + col(nt, r), kt * ke + ch * _M_VEC]
            ),
            seg >= s.local,
        )
        for i in T.unroll(2):
            for j in T.unroll(_M_GU_HALF // 8):
                if s.inter % _M_GU_HALF == 0 or nt * _M_GU_HALF + 8 * j < s.inter:
                    for c in T.vectorized(2):
                        ACT[mt * _M_BM + W.frag_row(tx, i), nt * _M_GU_HALF + W.frag_col(tx, j, c)] = T.Cast(
                            "bfloat16",
                            _M__silu_mul(acc[4 * j + 2 * i + c], acc[4 * (j + _M_GU_HALF // 8) + 2 * i + c]),
                        )

    @T.prim_func
    def moe_gemm1(
        xp_ptr: T.handle,
        off_ptr: T.handle,
        tile_ptr: T.handle,
        w_ptr: T.handle,
        sw_ptr: T.handle,
        act_ptr: T.handle,
    ):
        XP = T.match_buffer(xp_ptr, (s.rows, s.hidden), "bfloat16")
        OFF = T.match_buffer(off_ptr, (s.segments + 1,), "int32")
        TILE = T.match_buffer(tile_ptr, (s.max_tiles,), "int32")
        W13 = T.match_buffer(w_ptr, (s.local, 2 * s.inter, s.hidden), "bfloat16")
        SW13 = T.match_buffer(sw_ptr, (2 * si, s.hidden), "bfloat16")
        ACT = T.match_buffer(act_ptr, (s.rows, s.inter), "bfloat16")
        T.device_entry()
        bx = T.cta_id([_M_SMS])
        tx = T.thread_id([W.THREADS])
        pool = T.alloc_buffer((W.smem_bytes(2 * _M_GU_HALF),), "uint8", scope="shared.dyn", align=1024)
        acc = T.alloc_local((_M_GU_HALF,), "float32")
        blocks: T.int32 = OFF[s.segments]
        for it in T.serial((s.max_tiles * n_tiles + _M_SMS - 1) // _M_SMS):
            if it * _M_SMS + bx < blocks * n_tiles:
                tile(it * _M_SMS + bx, blocks, TILE, pool, acc, tx, XP, W13, SW13, ACT)

    return moe_gemm1


def _M_gemm2(s: _M_MoeShape) -> Any:
    """Y[r, h] = row_weight[r] * (Act[r] . down_e[h]) for the tile's segment e (persistent)."""
    k_tiles = s.inter // W.k_elems("bfloat16")
    n_tiles = (s.hidden + _M_BN2 - 1) // _M_BN2
    ke = W.k_elems("bfloat16")
    si = s.shared * s.inter

    @T.macro
    def tile(t, blocks, TILE, pool, acc, tx, ACT, W2, SW2, RW, Y):
        mt, nt = T.meta_var(W.raster(t, blocks, n_tiles))
        seg: T.int32 = TILE[mt]
        T.cuda.cta_sync()  # every warpgroup is done with the ring of the previous tile
        W.mainloop(
            pool,
            acc,
            None,
            tx,
            k_tiles,
            _M_BN2,
            "bfloat16",
            lambda kt, r, ch: ACT.ptr_to([mt * _M_BM + r, kt * ke + ch * _M_VEC]),
            lambda kt, r, ch: W2.ptr_to([seg, W.clamped_row(nt * _M_BN2 + r, s.hidden, _M_BN2), kt * ke + ch * _M_VEC]),
            None,
            lambda kt, r, ch: SW2.ptr_to(
                [W.clamped_row(nt * _M_BN2 + r, s.hidden, _M_BN2), (seg - s.local) * s.inter + kt * ke + ch * _M_VEC]
            ),
            seg >= s.local,
        )
        for i in T.unroll(2):
            wr: T.f32 = RW[mt * _M_BM + W.frag_row(tx, i)]
            for j in T.unroll(_M_BN2 // 8):
                if s.hidden % _M_BN2 == 0 or nt * _M_BN2 + 8 * j < s.hidden:
                    for c in T.vectorized(2):
                        Y[mt * _M_BM + W.frag_row(tx, i), nt * _M_BN2 + W.frag_col(tx, j, c)] = T.Cast(
                            "bfloat16", acc[4 * j + 2 * i + c] * wr
                        )

    @T.prim_func
    def moe_gemm2(
        act_ptr: T.handle,
        off_ptr: T.handle,
        tile_ptr: T.handle,
        w_ptr: T.handle,
        sw_ptr: T.handle,
        rw_ptr: T.handle,
        y_ptr: T.handle,
    ):
        ACT = T.match_buffer(act_ptr, (s.rows, s.inter), "bfloat16")
        OFF = T.match_buffer(off_ptr, (s.segments + 1,), "int32")
        TILE = T.match_buffer(tile_ptr, (s.max_tiles,), "int32")
        W2 = T.match_buffer(w_ptr, (s.local, s.hidden, s.inter), "bfloat16")
        SW2 = T.match_buffer(sw_ptr, (s.hidden, si), "bfloat16")
        RW = T.match_buffer(rw_ptr, (s.rows,), "float32")
        Y = T.match_buffer(y_ptr, (s.rows, s.hidden), "bfloat16")
        T.device_entry()
        bx = T.cta_id([_M_SMS])
        tx = T.thread_id([W.THREADS])
        pool = T.alloc_buffer((W.smem_bytes(_M_BN2),), "uint8", scope="shared.dyn", align=1024)
        acc = T.alloc_local((_M_BN2 // 2,), "float32")
        blocks: T.int32 = OFF[s.segments]
        for it in T.serial((s.max_tiles * n_tiles + _M_SMS - 1) // _M_SMS):
            if it * _M_SMS + bx < blocks * n_tiles:
                tile(it * _M_SMS + bx, blocks, TILE, pool, acc, tx, ACT, W2, SW2, RW, Y)

    return moe_gemm2


def _M_combine(s: _M_MoeShape) -> Any:
    """out[t] = bf16(sum over the token's rows r of Y[r]), float32 sums."""
    chunks = s.hidden // _M_VEC
    per_thread = (chunks + _M_THREADS - 1) // _M_THREADS

    @T.prim_func
    def moe_combine(y_ptr: T.handle, tr_ptr: T.handle, o_ptr: T.handle):
        Y = T.match_buffer(y_ptr, (s.rows, s.hidden), "bfloat16")
        TR = T.match_buffer(tr_ptr, (s.tokens, s.token_slots), "int32")
        OUT = T.match_buffer(o_ptr, (s.tokens, s.hidden), "bfloat16")
        T.device_entry()
        t = T.cta_id([s.tokens])
        tx = T.thread_id([_M_THREADS])
        yv = T.alloc_local((_M_VEC,), "bfloat16")
        sv = T.alloc_local((_M_VEC,), "float32")
        ov = T.alloc_local((_M_VEC,), "bfloat16")
        for c in T.unroll(per_thread):
            col = T.meta_var((c * _M_THREADS + tx) * _M_VEC)
            if c * _M_THREADS + tx < chunks:
                for v in T.unroll(_M_VEC):
                    sv[v] = T.float32(0)
                for j in T.unroll(s.token_slots):
                    r: T.int32 = TR[t, j]
                    if r >= 0:
                        for v in T.vectorized(_M_VEC):
                            yv[v] = Y[r, col + v]
                        for v in T.unroll(_M_VEC):
                            sv[v] = sv[v] + T.Cast("float32", yv[v])
                for v in T.unroll(_M_VEC):
                    ov[v] = T.Cast("bfloat16", sv[v])
                for v in T.vectorized(_M_VEC):
                    OUT[t, col + v] = ov[v]

    return moe_combine


def _M_build(s: _M_MoeShape) -> tuple[tvm.runtime.Module, ...]:
    """(scan, scatter, gemm1, gemm2, combine) modules."""
    return tuple(
        tvm.compile(tvm.IRModule({"main": f(s)}), target=_M_TARGET, tir_pipeline="tirx")
        for f in (_M_scan, _M_scatter, _M_gemm1, _M_gemm2, _M_combine)
    )


def _M_run_pipeline(
    kernels: tuple,
    s: _M_MoeShape,
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
    k_scan, k_scatter, k_gemm1, k_gemm2, k_combine = kernels
    dev = x.device
    offsets = torch.empty(s.segments + 1, dtype=torch.int32, device=dev)
    tiles = torch.empty(s.max_tiles, dtype=torch.int32, device=dev)
    k_scan(counts, offsets, tiles)
    xp = torch.empty((s.rows, s.hidden), dtype=torch.bfloat16, device=dev)
    row_w = torch.empty(s.rows, dtype=torch.float32, device=dev)
    token_rows = torch.empty((s.tokens, s.token_slots), dtype=torch.int32, device=dev)
    k_scatter(x, pair_expert, pair_weight, pair_slot, shared_gate, offsets, xp, row_w, token_rows)
    act = torch.empty((s.rows, s.inter), dtype=torch.bfloat16, device=dev)
    k_gemm1(xp, offsets, tiles, w13, shared_w13, act)
    y = torch.empty((s.rows, s.hidden), dtype=torch.bfloat16, device=dev)
    k_gemm2(act, offsets, tiles, w2, shared_w2, row_w, y)
    out = torch.empty((s.tokens, s.hidden), dtype=torch.bfloat16, device=dev)
    k_combine(y, token_rows, out)
    return out


M = SimpleNamespace(
    BM=_M_BM,
    GU_HALF=_M_GU_HALF,
    BN2=_M_BN2,
    VEC=_M_VEC,
    THREADS=_M_THREADS,
    SMS=_M_SMS,
    TARGET=_M_TARGET,
    MoeShape=_M_MoeShape,
    scan=_M_scan,
    scatter=_M_scatter,
    _silu_mul=_M__silu_mul,
    gemm1=_M_gemm1,
    gemm2=_M_gemm2,
    combine=_M_combine,
    build=_M_build,
    run_pipeline=_M_run_pipeline,
)

# ---- end of bundle ----


EXPERTS = 512
LOCAL = 64
TOP_K = 10
PER_LANE = EXPERTS // 32
THREADS = 256
TOKENS_PER_CTA = THREADS // 32
VEC = 8
NEG_BIG = -3.0e38
FULL = 0xFFFFFFFF

_KERNELS: dict[tuple[int, int, int, int], tuple] = {}


def _gate_rounds(hidden: int) -> int:
    """Rounds of the shared gate's dot: lane l reads the 16-byte vectors l, l + 32, ... of the row (the last round
    partial where the row is not 32 whole vectors: SMOKE's 128 values are 16 vectors)."""
    return (hidden // VEC + 31) // 32


def _route(tokens: int, hidden: int):
    grid = (tokens + TOKENS_PER_CTA - 1) // TOKENS_PER_CTA
    xv_per_lane = _gate_rounds(hidden)

    @T.prim_func
    def route(
        l_ptr: T.handle,
        x_ptr: T.handle,
        g_ptr: T.handle,
        offset: T.int32,
        pe_ptr: T.handle,
        pw_ptr: T.handle,
        ps_ptr: T.handle,
        cnt_ptr: T.handle,
        sg_ptr: T.handle,
    ):
        L = T.match_buffer(l_ptr, (tokens, EXPERTS), "bfloat16")
        X = T.match_buffer(x_ptr, (tokens, hidden), "bfloat16")
        G = T.match_buffer(g_ptr, (hidden,), "bfloat16")
        PE = T.match_buffer(pe_ptr, (tokens, TOP_K), "int32")
        PW = T.match_buffer(pw_ptr, (tokens, TOP_K), "float32")
        PS = T.match_buffer(ps_ptr, (tokens, TOP_K), "int32")
        CNT = T.match_buffer(cnt_ptr, (LOCAL,), "int32")
        SG = T.match_buffer(sg_ptr, (tokens,), "float32")
        T.device_entry()
        bx = T.cta_id([grid])
        tx = T.thread_id([THREADS])
        tok = T.meta_var(bx * TOKENS_PER_CTA + tx // 32)
        row = T.meta_var(T.min(tok, tokens - 1))
        lane = T.meta_var(tx % 32)
        lv = T.alloc_local((PER_LANE,), "float32")
        xv = T.alloc_local((VEC,), "bfloat16")
        gv = T.alloc_local((VEC,), "bfloat16")
        sel_id = T.alloc_local((TOP_K,), "int32")
        sel_v = T.alloc_local((TOP_K,), "float32")
        ev = T.alloc_local((TOP_K,), "float32")
        for i in T.unroll(PER_LANE):
            lv[i] = T.Cast("float32", L[row, i * 32 + lane])
        dot: T.f32 = T.float32(0)
        for c in T.unroll(xv_per_lane):
            if (c * 32 + lane) * VEC < hidden:
                for v in T.vectorized(VEC):
                    xv[v] = X[row, (c * 32 + lane) * VEC + v]
                for v in T.vectorized(VEC):
                    gv[v] = G[(c * 32 + lane) * VEC + v]
                for v in T.unroll(VEC):
                    dot = dot + T.Cast("float32", xv[v]) * T.Cast("float32", gv[v])
        dot = T.cuda.warp_sum(dot)
        for r in T.unroll(TOP_K):
            best: T.f32 = T.float32(NEG_BIG)
            best_id: T.int32 = EXPERTS
            # ids grow with i, so the strict test keeps the lower id of equal logits
            for i in T.unroll(PER_LANE):
                if lv[i] > best:
                    best = lv[i]
                    best_id = i * 32 + lane
            for k in T.unroll(5):
                ov: T.f32 = T.cuda.__shfl_xor_sync(FULL, best, 16 >> k, 32)
                oi: T.int32 = T.cuda.__shfl_xor_sync(FULL, best_id, 16 >> k, 32)
                if ov > best or (ov == best and oi < best_id):
                    best = ov
                    best_id = oi
            sel_v[r] = best
            sel_id[r] = best_id
            for i in T.unroll(PER_LANE):
                if best_id == i * 32 + lane:
                    lv[i] = T.float32(NEG_BIG)
        total: T.f32 = T.float32(0)
        for r in T.unroll(TOP_K):
            ev[r] = T.exp(sel_v[r] - sel_v[0])
            total = total + ev[r]
        inv: T.f32 = T.float32(1) / total
        if tok < tokens and lane == 0:
            SG[tok] = T.float32(1) / (T.float32(1) + T.exp(T.float32(0) - dot))
            for r in T.unroll(TOP_K):
                e: T.int32 = sel_id[r] - offset
                if e >= 0 and e < LOCAL:
                    PE[tok, r] = e
                    PS[tok, r] = T.cuda.atomic_add(CNT.ptr_to([e]), 1)
                else:
                    PE[tok, r] = -1
                    PS[tok, r] = 0
                PW[tok, r] = ev[r] * inv

    return route


def _shape_key(
    hidden_states: torch.Tensor, router_logits: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor,
    shared_w13: torch.Tensor, *_: object,
) -> tuple[int, int, int, int]:  # fmt: skip
    """(tokens, hidden, intermediate, shared segments)."""
    return hidden_states.shape[0], hidden_states.shape[1], w2.shape[2], shared_w13.shape[0] // w13.shape[1]


def _shape(tokens: int, hidden: int, inter: int, segments: int) -> M.MoeShape:
    return M.MoeShape(tokens, hidden, inter, LOCAL, TOP_K, segments)


def _build(tokens: int, hidden: int, inter: int, segments: int) -> tuple:
    route = tvm.compile(tvm.IRModule({"main": _route(tokens, hidden)}), target=M.TARGET, tir_pipeline="tirx")
    return (route, *M.build(_shape(tokens, hidden, inter, segments)))


def run(
    hidden_states: torch.Tensor,
    router_logits: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    shared_w13: torch.Tensor,
    shared_w2: torch.Tensor,
    shared_gate_weight: torch.Tensor,
    local_expert_offset: int,
) -> torch.Tensor:
    key = _shape_key(hidden_states, router_logits, w13, w2, shared_w13)
    kernels = _KERNELS.get(key)
    if kernels is None:
        kernels = _KERNELS[key] = _build(*key)
    tokens = key[0]
    dev = hidden_states.device
    pair_e = torch.empty((tokens, TOP_K), dtype=torch.int32, device=dev)
    pair_w = torch.empty((tokens, TOP_K), dtype=torch.float32, device=dev)
    pair_s = torch.empty((tokens, TOP_K), dtype=torch.int32, device=dev)
    counts = torch.zeros(LOCAL, dtype=torch.int32, device=dev)
    shared_gate = torch.empty(tokens, dtype=torch.float32, device=dev)
    kernels[0](
        router_logits, hidden_states, shared_gate_weight.view(-1), int(local_expert_offset),
        pair_e, pair_w, pair_s, counts, shared_gate,
    )  # fmt: skip
    return M.run_pipeline(
        kernels[1:], _shape(*key), hidden_states, pair_e, pair_w, pair_s, counts, shared_gate,
        w13, w2, shared_w13, shared_w2,
    )  # fmt: skip
