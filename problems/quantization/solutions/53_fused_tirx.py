"""p53 mlp_gate_up_projection_qwen3vl_fp8 — plan `fused`, TIRx: activation-quant kernel + FP8 WGMMA GEMM.

Plan: the op is a W8A8 block-FP8 linear, so it runs the shared full plan of
`_fp8linear_tirx.py` on hidden_states [T, 4096] against the merged gate/up weight [24576, 4096]:
(1) a TIRx kernel quantises the activation per (token, 128-channel group) to fp8 codes + block-major
scales; (2) the TIRx FP8 GEMM (two warpgroups of m64n128k32 WGMMAs per 128 x 128 tile, cp.async
into a 6-deep 128B-swizzled ring, per-k-tile promotion with s_act * s_w, tiles rastered 8 m-tiles at
a time so the 100 MB weight streams from HBM ~4 times) writes the bf16 gate_up output.
Compiled once per (tokens, hidden, gate_up_size).
"""

from types import SimpleNamespace
from typing import Any

import torch
import tvm
from tvm.script import tirx as T

# bundle: problems/_wgmma_tirx.py as W
# bundle: problems/quantization/solutions/_fp8linear_tirx.py as L

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


# problems/quantization/solutions/_fp8linear_tirx.py
_L_BN = W.FP8_BN
_L_NREG = _L_BN // 2
_L_TARGET = {"kind": "cuda", "arch": "sm_90a"}

_L__KERNELS: dict[tuple, tuple[tvm.runtime.Module, tvm.runtime.Module]] = {}


def _L_gemm(tokens: int, k: int, n: int, out_dtype: str = "bfloat16"):
    """The block-FP8 GEMM prim_func: (A fp8 [T, K], B fp8 [N, K], SA [K/128, T], SB [ceil(N/128), K/128])
    -> OUT [T, N] in `out_dtype`; N a multiple of 64."""
    if k % W.GROUP or n % 64:
        raise ValueError(f"K {k} must be a multiple of 128 and N {n} of 64")
    k_tiles = k // W.GROUP
    m_tiles = (tokens + W.BM - 1) // W.BM
    n_tiles = (n + _L_BN - 1) // _L_BN

    @T.prim_func
    def fp8_gemm(a_ptr: T.handle, b_ptr: T.handle, sa_ptr: T.handle, sb_ptr: T.handle, o_ptr: T.handle):
        A = T.match_buffer(a_ptr, (tokens, k), "float8_e4m3fn")
        B = T.match_buffer(b_ptr, (n, k), "float8_e4m3fn")
        SA = T.match_buffer(sa_ptr, (k_tiles, tokens), "float32")
        SB = T.match_buffer(sb_ptr, (n_tiles, k_tiles), "float32")
        OUT = T.match_buffer(o_ptr, (tokens, n), out_dtype)
        T.device_entry()
        bx = T.cta_id([m_tiles * n_tiles])
        tx = T.thread_id([W.THREADS])
        pool = T.alloc_buffer((W.smem_bytes(_L_BN),), "uint8", scope="shared.dyn", align=1024)
        acc = T.alloc_local((_L_NREG,), "float32")
        tmp = T.alloc_local((_L_NREG,), "float32")
        mt, nt = T.meta_var(W.raster(bx, m_tiles, n_tiles))
        m0 = T.meta_var(mt * W.BM)
        W.block_fp8_mainloop(pool, acc, tmp, tx, A, B, SA, SB, tokens, n, m0, nt, k_tiles)
        for i in T.unroll(2):
            if m0 + W.frag_row(tx, i) < tokens:
                for j in T.unroll(_L_BN // 8):
                    if n % _L_BN == 0 or nt * _L_BN + 8 * j < n:
                        for c in T.vectorized(2):
                            OUT[m0 + W.frag_row(tx, i), nt * _L_BN + W.frag_col(tx, j, c)] = T.Cast(
                                out_dtype, acc[4 * j + 2 * i + c]
                            )

    return fp8_gemm


def _L_build(
    tokens: int, k: int, n: int, out_dtype: str = "bfloat16", *, ue8m0: bool = False
) -> tuple[tvm.runtime.Module, tvm.runtime.Module]:
    """(activation quantiser, block-FP8 GEMM) modules."""
    quant = tvm.compile(
        tvm.IRModule({"main": W.act_quant(tokens, k, ue8m0=ue8m0)}), target=_L_TARGET, tir_pipeline="tirx"
    )
    fp8_gemm = tvm.compile(
        tvm.IRModule({"main": _L_gemm(tokens, k, n, out_dtype)}), target=_L_TARGET, tir_pipeline="tirx"
    )
    return quant, fp8_gemm


def _L_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    weight_scale: torch.Tensor,
    out_dtype: torch.dtype = torch.bfloat16,
    *,
    ue8m0: bool = False,
) -> torch.Tensor:
    """x [T, K] bf16 (contiguous), weight [N, K] fp8, weight_scale [ceil(N/128), K/128] -> [T, N] in
    out_dtype (bf16 or float32); `ue8m0` rounds the activation scales up to powers of two."""
    tokens, k = x.shape
    n = weight.shape[0]
    key = (tokens, k, n, str(out_dtype).removeprefix("torch."), ue8m0)
    kernels = _L__KERNELS.get(key)
    if kernels is None:
        kernels = _L__KERNELS[key] = _L_build(*key[:4], ue8m0=ue8m0)
    quant, fp8_gemm = kernels
    q = torch.empty((tokens, k), dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty((k // W.GROUP, tokens), dtype=torch.float32, device=x.device)
    quant(x.view(tokens * (k // W.GROUP), W.GROUP), q.view(tokens * (k // W.GROUP), W.GROUP), s)
    out = torch.empty((tokens, n), dtype=out_dtype, device=x.device)
    fp8_gemm(q, weight, s, weight_scale, out)
    return out


L = SimpleNamespace(
    BN=_L_BN,
    NREG=_L_NREG,
    TARGET=_L_TARGET,
    _KERNELS=_L__KERNELS,
    gemm=_L_gemm,
    build=_L_build,
    linear=_L_linear,
)

# ---- end of bundle ----


def _shape_key(hidden_states: torch.Tensor, gate_up_weight: torch.Tensor, *_: object) -> tuple[int, int, int]:
    return hidden_states.shape[0], hidden_states.shape[1], gate_up_weight.shape[0]


def _build(tokens: int, k: int, n: int):
    return L.build(tokens, k, n)


def run(hidden_states: torch.Tensor, gate_up_weight: torch.Tensor, gate_up_scale: torch.Tensor) -> torch.Tensor:
    return L.linear(hidden_states, gate_up_weight, gate_up_scale)
