"""p72 gdn_decode_qwen3next — plan `fused`, TIRx: gates and state update in one kernel.

Plan: one CTA of 256 threads per (sequence, value head) streams that head's 128×128 float32 k-last
state once in and once out (the compulsory traffic). Every thread first computes the head's gates in
float32, the model's formulas: g = -exp(A_log) * softplus(a + dt_bias) (softplus = x above 20, else
log1p(exp(x))), decay = exp(g), beta = 1 / (1 + exp(-b)). TIRx compiles CUDA with --use_fast_math,
which turns expf into an ex2.approx of a rounded product (error growing with |x|), so exp is written
out: Cody-Waite reduction by ln 2 with explicit FMAs, a degree-7 Taylor polynomial on |f| <= ln2/2
(truncation < 0.1 ulp), and 2^j built from the exponent bits; 1/(1 + e) is rcp.approx plus one FMA
Newton step; log1pf stays the CUDA library one (not affected by fast math). Each warp owns 16 state
rows, a half-warp one row: a lane holds two 16-byte chunks (K columns 4·l..4·l+3 and 64 + the same,
l = lane mod 16) so each load instruction of a warp covers two whole 256-byte row halves (coalesced),
and one width-16 butterfly (4 shuffles) reduces two rows at once: 64 shuffles per warp, not 160.
All 16 row-chunk loads of a lane (64 floats, 16 LDG.128 in flight per lane), its 8 v values and the
gate inputs are issued before any math and the gates are computed while they are in flight (checked
in the SASS of nvcc 13.0 with TVM's ptxas flags: 116 registers under __launch_bounds__(256, 2), so 2
CTAs/SM, no spills; the partial's one-lane-per-4-columns kernel instead gets its loads sunk by ptxas to
one 512-byte load per warp at a time). Per row pair: S *= decay; sk = Σ S·k; u = beta·(v − sk);
S += u·k; o = scale·Σ S·q; lanes 0..7 of each half keep one row's o and the warp writes its 16 outputs
with one 32-byte store. Compiled once per batch size.
"""

import math

import torch
import tvm
from tvm.script import tirx as T

HV = 32  # value heads
HK = 16  # q/k heads
D = 128
THREADS = 256
WARPS = THREADS // 32
ROWS_PER_WARP = D // WARPS  # 16
GROUP = 16  # lanes per state row (half-warp)
PAIRS = ROWS_PER_WARP // 2  # row pairs per warp: half 0 takes the even row, half 1 the odd one
VEC = 4  # float32 per 16-byte chunk
CHUNKS = D // (GROUP * VEC)  # 16-byte chunks per lane per row (2)
COLS = CHUNKS * VEC  # K columns per lane (8)
SOFTPLUS_THRESHOLD = 20.0
CTAS_PER_SM = 2

# exp(x): x = j·ln2 + f, |f| <= ln2/2; ln2 split so that j·LN2_HI is exact for |j| < 2^9
LOG2E = 1.4426950408889634
LN2_HI = 0.693145751953125
LN2_LO = math.log(2.0) - LN2_HI
EXP_LO, EXP_HI = -87.0, 88.0
TAYLOR = [1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0]  # x^7 .. x^0

_KERNELS: dict[tuple[int], tvm.runtime.Module] = {}


def _f32(x: float):
    return T.float32(x)


def _fma(a, b, c):
    """Single-rounding a·b + c (CUDA __fmaf_rn), independent of the compiler's contraction choice."""
    return T.call_pure_extern("float32", "__fmaf_rn", a, b, c)


def _exp(x):
    """float32 e^x to ~1 ulp without the fast-math intrinsics (0 below EXP_LO)."""
    xc = T.max(T.min(x, _f32(EXP_HI)), _f32(EXP_LO))
    j = T.floor(_fma(xc, _f32(LOG2E), _f32(0.5)))
    f = _fma(j, _f32(-LN2_LO), _fma(j, _f32(-LN2_HI), xc))
    p = _f32(TAYLOR[0])
    for c in TAYLOR[1:]:
        p = _fma(p, f, _f32(c))
    two_j = T.reinterpret("float32", T.shift_left(T.Cast("int32", j) + 127, 23))
    return T.Select(x < _f32(EXP_LO), _f32(0.0), p * two_j)


def _build(batch: int) -> tvm.runtime.Module:
    @T.prim_func
    def gdn_step(
        q_ptr: T.handle,
        k_ptr: T.handle,
        v_ptr: T.handle,
        s_ptr: T.handle,
        alog_ptr: T.handle,
        a_ptr: T.handle,
        dt_ptr: T.handle,
        b_ptr: T.handle,
        o_ptr: T.handle,
        ns_ptr: T.handle,
        scale: T.float32,
    ):
        Q = T.match_buffer(q_ptr, (batch, HK, D), "bfloat16")
        K = T.match_buffer(k_ptr, (batch, HK, D), "bfloat16")
        V = T.match_buffer(v_ptr, (batch, HV, D), "bfloat16")
        S = T.match_buffer(s_ptr, (batch, HV, D, D), "float32")
        ALOG = T.match_buffer(alog_ptr, (HV,), "float32")
        A = T.match_buffer(a_ptr, (batch, HV), "bfloat16")
        DT = T.match_buffer(dt_ptr, (HV,), "float32")
        BG = T.match_buffer(b_ptr, (batch, HV), "bfloat16")
        OUT = T.match_buffer(o_ptr, (batch, HV, D), "bfloat16")
        NS = T.match_buffer(ns_ptr, (batch, HV, D, D), "float32")
        T.device_entry()
        bh = T.cta_id([batch * HV])
        tx = T.thread_id([THREADS])
        # __launch_bounds__(256, 2): at most 128 registers, so two CTAs (16 warps) share an SM
        T.attr(0, "tirx.launch_bounds_min_blocks_per_sm", CTAS_PER_SM)
        b = T.meta_var(bh // HV)
        h = T.meta_var(bh % HV)
        warp = T.meta_var(tx // 32)
        half = T.meta_var((tx % 32) // GROUP)
        sl = T.meta_var(tx % GROUP)
        kv = T.alloc_local((COLS,), "bfloat16")
        qv = T.alloc_local((COLS,), "bfloat16")
        kf = T.alloc_local((COLS,), "float32")
        qf = T.alloc_local((COLS,), "float32")
        vf = T.alloc_local((PAIRS,), "float32")
        st = T.alloc_local((PAIRS, COLS), "float32")
        # lane (half, sl) holds K columns c*64 + sl*4 + i of rows warp*16 + 2p + half
        for c in T.unroll(CHUNKS):
            for i in T.vectorized(VEC):
                kv[c * VEC + i] = K[b, h // 2, c * (GROUP * VEC) + sl * VEC + i]
        for c in T.unroll(CHUNKS):
            for i in T.vectorized(VEC):
                qv[c * VEC + i] = Q[b, h // 2, c * (GROUP * VEC) + sl * VEC + i]
        # issue all 16 state-chunk loads of this lane before any math (and before any store)
        for p in T.unroll(PAIRS):
            for c in T.unroll(CHUNKS):
                for i in T.vectorized(VEC):
                    st[p, c * VEC + i] = S[b, h, warp * ROWS_PER_WARP + 2 * p + half, c * (GROUP * VEC) + sl * VEC + i]
        for p in T.unroll(PAIRS):
            vf[p] = T.Cast("float32", V[b, h, warp * ROWS_PER_WARP + 2 * p + half])
        for i in T.unroll(COLS):
            kf[i] = T.Cast("float32", kv[i])
            qf[i] = T.Cast("float32", qv[i])
        # gates, float32, fast-math-free exp
        x: T.f32 = T.Cast("float32", A[b, h]) + DT[h]
        ex: T.f32 = _exp(x)
        sp: T.f32 = T.Select(x > _f32(SOFTPLUS_THRESHOLD), x, T.log1p(ex))
        ea: T.f32 = _exp(ALOG[h])
        g: T.f32 = T.float32(0) - ea * sp
        decay: T.f32 = _exp(g)
        eb: T.f32 = _exp(T.float32(0) - T.Cast("float32", BG[b, h]))
        den: T.f32 = T.float32(1) + eb
        r0: T.f32 = T.float32(1) / den
        beta: T.f32 = _fma(r0, _fma(T.float32(0) - den, r0, T.float32(1)), r0)
        o_mine: T.f32 = T.float32(0)
        for p in T.unroll(PAIRS):
            sk: T.f32 = T.float32(0)
            for i in T.unroll(COLS):
                st[p, i] = st[p, i] * decay
                sk = sk + st[p, i] * kf[i]
            sk = T.cuda.warp_sum(sk, GROUP)
            u: T.f32 = beta * (vf[p] - sk)
            so: T.f32 = T.float32(0)
            for i in T.unroll(COLS):
                st[p, i] = st[p, i] + u * kf[i]
                so = so + st[p, i] * qf[i]
            so = T.cuda.warp_sum(so, GROUP)
            o_mine = T.Select(sl == p, so, o_mine)
            for c in T.unroll(CHUNKS):
                for i in T.vectorized(VEC):
                    NS[b, h, warp * ROWS_PER_WARP + 2 * p + half, c * (GROUP * VEC) + sl * VEC + i] = st[p, c * VEC + i]
        if sl < PAIRS:
            OUT[b, h, warp * ROWS_PER_WARP + 2 * sl + half] = T.Cast("bfloat16", scale * o_mine)

    mod = tvm.IRModule({"main": gdn_step})
    return tvm.compile(mod, target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")


def _shape_key(q: torch.Tensor, *_: object) -> tuple[int]:
    return (q.shape[0],)


def run(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    state: torch.Tensor,
    A_log: torch.Tensor,
    a: torch.Tensor,
    dt_bias: torch.Tensor,
    b: torch.Tensor,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    if not scale:
        scale = q.shape[-1] ** -0.5
    key = _shape_key(q)
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = _KERNELS[key] = _build(*key)
    batch = key[0]
    out = torch.empty_like(v)
    new_state = torch.empty_like(state)
    kernel(
        q.reshape(batch, HK, D),
        k.reshape(batch, HK, D),
        v.reshape(batch, HV, D),
        state.contiguous(),
        A_log.contiguous(),
        a.reshape(batch, HV),
        dt_bias.contiguous(),
        b.reshape(batch, HV),
        out.view(batch, HV, D),
        new_state,
        float(scale),
    )
    return out, new_state
