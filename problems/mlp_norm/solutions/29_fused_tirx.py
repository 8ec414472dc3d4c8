"""p29 gelu_feedforward_flux_fp32 — plan `fused`, TIRx: the up GEMM with the tanh-GELU epilogue, then the down GEMM.

Plan: both GEMMs must keep float32 accuracy (TF32/bf16 tensor cores fall outside the allowance), so
they run on the float32 FMA units as classic register-tiled SIMT GEMMs C[M, N] = A[M, K] B[N, K]^T
(activations and nn.Linear weights are both K-contiguous). A CTA of 256 threads owns a 128 × 128
accumulator tile over K in stages of 16: per stage it loads the A and B slices with 16-byte loads (four
threads per 64-byte row piece: whole sectors), stores them k-major in shared memory (rows padded to 132
floats), double-buffered so the next slice's loads are in flight during the 16 rank-1 updates of this
one; each thread holds an 8 × 8 micro-tile as rows {4ty..4ty+3, 64+4ty..} × columns {4tx.., 64+4tx..}
(16-byte shared reads, broadcast or conflict-free) and does 64 FMAs per k. The 16 products of a stage
are summed into a partial before it is added to the accumulator (two-level float32 summation: p32's
CPU emulation found sequential accumulation over K past the allowance); one CTA of 8 warps per SM.
(1) up: g = gelu_tanh(x W1^T + b1) written in float32 (the 201 MB intermediate, read back once by (2));
tanh(y) = 1 - 2 / (exp(2y) + 1) with exp written out (Cody-Waite, degree-7 Taylor: TVM compiles with
--use_fast_math) and a reciprocal refined by one Newton step. (2) down: out = g W2^T + b2. The token
count is masked (partial last row tile); compiled once per token count and cached.
"""

import math

import torch
import tvm
from tvm.script import tirx as T

D = 3072  # hidden size
F = 12288  # ffn size
GELU_C = math.sqrt(2.0 / math.pi)
GELU_A = 0.044715
BM = 128  # tile rows (tokens)
BN = 128  # tile columns
BK = 16  # k per shared-memory stage (also the block of the two-level accumulation)
PAD = 4  # floats of row padding in shared memory
THREADS = 256
TM = 8  # micro-tile rows per thread
TN = 8  # micro-tile columns per thread
HALF = 64  # a thread's second 4 rows / columns start here
LOADS = BM * BK // 4 // THREADS  # 16-byte loads of A (and of B) per thread per stage (2)
KQ = BK // 4  # 16-byte pieces per tile row and stage (4)

# exp(x): x = j·ln2 + f, |f| <= ln2/2; ln2 split so that j·LN2_HI is exact for |j| < 2^9
LOG2E = 1.4426950408889634
LN2_HI = 0.693145751953125
LN2_LO = math.log(2.0) - LN2_HI
EXP_LO, EXP_HI = -87.0, 88.0
TAYLOR = [1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0]  # x^7 .. x^0

_KERNELS: dict[tuple[int], tuple] = {}


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


def _gemm(M: int, N: int, K: int, gelu: bool):
    """C = A B^T + bias over a [ceil(M/128), N/128] grid, through tanh-GELU when `gelu`."""
    grid_m = (M + BM - 1) // BM
    grid_n = N // BN
    k_tiles = K // BK

    @T.prim_func
    def gemm(a_ptr: T.handle, b_ptr: T.handle, bias_ptr: T.handle, c_ptr: T.handle):
        A = T.match_buffer(a_ptr, (M, K), "float32")
        B = T.match_buffer(b_ptr, (N, K), "float32")
        BIAS = T.match_buffer(bias_ptr, (N,), "float32")
        C = T.match_buffer(c_ptr, (M, N), "float32")
        T.device_entry()
        bx = T.cta_id([grid_m * grid_n])
        tx = T.thread_id([THREADS])
        # __launch_bounds__(256, 1): 64 accumulators and 64 stage partials in registers
        T.attr(0, "tirx.launch_bounds_min_blocks_per_sm", 1)
        a_s = T.alloc_shared((2, BK, BM + PAD), "float32")
        b_s = T.alloc_shared((2, BK, BN + PAD), "float32")
        acc = T.alloc_local((TM, TN), "float32")
        part = T.alloc_local((TM, TN), "float32")
        ra = T.alloc_local((TM,), "float32")
        rb = T.alloc_local((TN,), "float32")
        la = T.alloc_local((LOADS, 4), "float32")
        lb = T.alloc_local((LOADS, 4), "float32")
        ov = T.alloc_local((4,), "float32")
        m0 = T.meta_var((bx // grid_n) * BM)
        n0 = T.meta_var((bx % grid_n) * BN)
        ty = T.meta_var(tx // 16)
        tn = T.meta_var(tx % 16)
        for i in T.unroll(TM):
            for j in T.unroll(TN):
                acc[i, j] = T.float32(0)
        for kt in T.serial(k_tiles + 1):
            # tile kt into registers (rows past M read as zeros)
            if kt < k_tiles:
                for q in T.unroll(LOADS):
                    lrow = T.meta_var((q * THREADS + tx) // KQ)  # tile row of this load
                    lk = T.meta_var((tx % KQ) * 4)  # its 4 k values
                    if m0 + lrow < M:
                        for e in T.vectorized(4):
                            la[q, e] = A[m0 + lrow, kt * BK + lk + e]
                    else:
                        for e in T.unroll(4):
                            la[q, e] = T.float32(0)
                    for e in T.vectorized(4):
                        lb[q, e] = B[n0 + lrow, kt * BK + lk + e]
            # tile kt - 1 from shared buffer (kt - 1) % 2: 16 rank-1 updates into a stage partial, added to
            # the accumulators once (two-level summation: float32 error grows with 16 + K/16 terms, not K)
            if kt > 0:
                cur = T.meta_var((kt - 1) % 2)
                for i in T.unroll(TM):
                    for j in T.unroll(TN):
                        part[i, j] = T.float32(0)
                for k in T.unroll(BK):
                    for e in T.vectorized(4):
                        ra[e] = a_s[cur, k, ty * 4 + e]
                    for e in T.vectorized(4):
                        ra[4 + e] = a_s[cur, k, HALF + ty * 4 + e]
                    for e in T.vectorized(4):
                        rb[e] = b_s[cur, k, tn * 4 + e]
                    for e in T.vectorized(4):
                        rb[4 + e] = b_s[cur, k, HALF + tn * 4 + e]
                    for i in T.unroll(TM):
                        for j in T.unroll(TN):
                            part[i, j] = part[i, j] + ra[i] * rb[j]
                for i in T.unroll(TM):
                    for j in T.unroll(TN):
                        acc[i, j] = acc[i, j] + part[i, j]
            if kt < k_tiles:
                for q in T.unroll(LOADS):
                    for e in T.unroll(4):
                        a_s[kt % 2, (tx % KQ) * 4 + e, (q * THREADS + tx) // KQ] = la[q, e]
                        b_s[kt % 2, (tx % KQ) * 4 + e, (q * THREADS + tx) // KQ] = lb[q, e]
            T.cuda.cta_sync()
        # epilogue: rows m0 + {4ty + i, 64 + 4ty + i}
        for i in T.unroll(TM):
            m = T.meta_var(m0 + (i // 4) * HALF + ty * 4 + i % 4)
            if m < M:
                for h in T.unroll(2):
                    for j in T.unroll(4):
                        y: T.f32 = acc[i, h * 4 + j] + BIAS[n0 + h * HALF + tn * 4 + j]
                        if gelu:
                            # tanh(u) = 1 - 2 / (exp(2u) + 1), u = c (y + a y^3)
                            u: T.f32 = T.float32(GELU_C) * (y + T.float32(GELU_A) * y * y * y)
                            den: T.f32 = _exp(T.float32(2) * u) + T.float32(1)
                            r0: T.f32 = T.float32(1) / den
                            rcp: T.f32 = _fma(r0, _fma(T.float32(0) - den, r0, T.float32(1)), r0)
                            ov[j] = T.float32(0.5) * y * (T.float32(2) - T.float32(2) * rcp)
                        else:
                            ov[j] = y
                    for e in T.vectorized(4):
                        C[m, n0 + h * HALF + tn * 4 + e] = ov[e]

    return tvm.compile(tvm.IRModule({"main": gemm}), target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")


def _build(tokens: int) -> tuple:
    return _gemm(tokens, F, D, gelu=True), _gemm(tokens, D, F, gelu=False)


def _shape_key(hidden_states: torch.Tensor, *_: object) -> tuple[int]:
    return (hidden_states.shape[0],)


def run(
    hidden_states: torch.Tensor,
    proj_in_weight: torch.Tensor,
    proj_in_bias: torch.Tensor,
    proj_out_weight: torch.Tensor,
    proj_out_bias: torch.Tensor,
) -> torch.Tensor:
    key = _shape_key(hidden_states)
    kernels = _KERNELS.get(key)
    if kernels is None:
        kernels = _KERNELS[key] = _build(*key)
    up, down = kernels
    x = hidden_states.contiguous()
    act = torch.empty((x.shape[0], F), dtype=torch.float32, device=x.device)
    up(x, proj_in_weight.contiguous(), proj_in_bias.contiguous(), act)
    out = torch.empty((x.shape[0], D), dtype=torch.float32, device=x.device)
    down(act, proj_out_weight.contiguous(), proj_out_bias.contiguous(), out)
    return out
