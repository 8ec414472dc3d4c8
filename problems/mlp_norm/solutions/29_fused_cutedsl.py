"""p29 gelu_feedforward_flux_fp32 — plan `fused`, CuTe DSL: the up GEMM with the tanh-GELU epilogue, then the down GEMM.

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
(1) up: g = gelu_tanh(x W1^T + b1) with precise tanh, written in float32 (the 201 MB intermediate, read
back once by (2)). (2) down: out = g W2^T + b2. The token count is symbolic and masked (partial last row
tile): one compilation per GEMM, cached, called through TVM FFI.
"""

import math

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor
from cutlass.memory.smem import SmemAllocator

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


@cute.kernel
def _gemm_kernel(mA: cute.Tensor, mB: cute.Tensor, mBias: cute.Tensor, mC: cute.Tensor, gelu: cutlass.Constexpr):
    M = cute.size(mA, mode=[0])
    K = cute.size(mA, mode=[1])
    N = cute.size(mC, mode=[1])
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    grid_n = N // BN
    m0 = (bidx // grid_n) * BM
    n0 = (bidx % grid_n) * BN
    lk = (tidx % KQ) * 4  # the 4 k values this thread loads
    ty = tidx // 16
    tn = tidx % 16
    smem = SmemAllocator()
    stage = cute.make_layout((2, BK, BM + PAD), stride=(BK * (BM + PAD), BM + PAD, 1))
    sA = smem.allocate_tensor(cutlass.Float32, stage, byte_alignment=16)
    sB = smem.allocate_tensor(cutlass.Float32, stage, byte_alignment=16)
    tA = cute.zipped_divide(sA, (1, 1, 4))  # ((1,1,4), (2, BK, 33))
    tB = cute.zipped_divide(sB, (1, 1, 4))
    gA = cute.zipped_divide(mA, (1, 4))  # ((1,4), (M, K/4))
    gB = cute.zipped_divide(mB, (1, 4))
    gC = cute.zipped_divide(mC, (1, 4))
    acc = cute.make_rmem_tensor((TM, TN), cutlass.Float32)
    acc.fill(0.0)
    part = cute.make_rmem_tensor((TM, TN), cutlass.Float32)
    ra = cute.make_rmem_tensor((4, 2), cutlass.Float32)  # column h: rows h·64 + 4ty + 0..3
    rb = cute.make_rmem_tensor((4, 2), cutlass.Float32)
    la = cute.make_rmem_tensor((4, LOADS), cutlass.Float32)
    lb = cute.make_rmem_tensor((4, LOADS), cutlass.Float32)
    ov = cute.make_rmem_tensor((4,), cutlass.Float32)
    k_tiles = K // BK
    for kt in cutlass.range(k_tiles + 1, unroll=1):
        # tile kt into registers (rows past M read as zeros)
        if kt < k_tiles:
            la.fill(0.0)
            for q in cutlass.range_constexpr(LOADS):
                lrow = (q * THREADS + tidx) // KQ  # tile row of this load
                if m0 + lrow < M:
                    cute.autovec_copy(gA[(0, None), (m0 + lrow, (kt * BK + lk) // 4)], la[None, q])
                cute.autovec_copy(gB[(0, None), (n0 + lrow, (kt * BK + lk) // 4)], lb[None, q])
        # tile kt - 1 from shared buffer (kt - 1) % 2: 16 rank-1 updates into a stage partial, added to the
        # accumulators once (two-level summation: float32 error grows with 16 + K/16 terms, not K)
        if kt > 0:
            cur = (kt - 1) % 2
            part.fill(0.0)
            for k in cutlass.range(BK, unroll=2):  # partly unrolled: keeps the shared reads near their use
                for h in cutlass.range_constexpr(2):
                    cute.autovec_copy(tA[(0, 0, None), (cur, k, h * (HALF // 4) + ty)], ra[None, h])
                    cute.autovec_copy(tB[(0, 0, None), (cur, k, h * (HALF // 4) + tn)], rb[None, h])
                for i in cutlass.range_constexpr(TM):
                    for j in cutlass.range_constexpr(TN):
                        part[i, j] = part[i, j] + ra[i] * rb[j]
            acc.store(acc.load() + part.load())
        if kt < k_tiles:
            for q in cutlass.range_constexpr(LOADS):
                for e in cutlass.range_constexpr(4):
                    sA[kt % 2, lk + e, (q * THREADS + tidx) // KQ] = la[e, q]
                    sB[kt % 2, lk + e, (q * THREADS + tidx) // KQ] = lb[e, q]
        cute.arch.sync_threads()
    # epilogue: rows m0 + {4ty + i, 64 + 4ty + i}
    for i in cutlass.range_constexpr(TM):
        m = m0 + (i // 4) * HALF + ty * 4 + i % 4
        if m < M:
            for h in cutlass.range_constexpr(2):
                for j in cutlass.range_constexpr(4):
                    y = acc[i, h * 4 + j] + mBias[n0 + h * HALF + tn * 4 + j]
                    if cutlass.const_expr(gelu):
                        u = cutlass.Float32(GELU_C) * (y + cutlass.Float32(GELU_A) * y * y * y)
                        y = cutlass.Float32(0.5) * y * (cutlass.Float32(1.0) + cute.math.tanh(u))
                    ov[j] = y
                cute.autovec_copy(ov, gC[(0, None), (m, (n0 + h * HALF + tn * 4) // 4)])


@cute.jit
def _gemm(mA: cute.Tensor, mB: cute.Tensor, mBias: cute.Tensor, mC: cute.Tensor, gelu: cutlass.Constexpr):
    M = cute.size(mA, mode=[0])
    grid = ((M + BM - 1) // BM) * (cute.size(mC, mode=[1]) // BN)
    _gemm_kernel(mA, mB, mBias, mC, gelu).launch(
        grid=[grid, 1, 1],
        block=[THREADS, 1, 1],
        # __launch_bounds__(256, 1): 64 accumulators and 64 stage partials in registers
        min_blocks_per_mp=1,
        preferred_smem_carveout=100,
    )


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        tokens = cute.sym_int()

        def compact(shape):
            order = tuple(range(len(shape) - 1, -1, -1))
            return make_fake_compact_tensor(cutlass.Float32, shape, stride_order=order, assumed_align=16)

        x, act, out = compact((tokens, D)), compact((tokens, F)), compact((tokens, D))
        w_in, w_out = compact((F, D)), compact((D, F))
        b_in, b_out = compact((F,)), compact((D,))
        opts = "--enable-tvm-ffi"
        _COMPILED.append(cute.compile(_gemm, x, w_in, b_in, act, True, options=opts))
        _COMPILED.append(cute.compile(_gemm, act, w_out, b_out, out, False, options=opts))
    return _COMPILED


def run(
    hidden_states: torch.Tensor,
    proj_in_weight: torch.Tensor,
    proj_in_bias: torch.Tensor,
    proj_out_weight: torch.Tensor,
    proj_out_bias: torch.Tensor,
) -> torch.Tensor:
    up, down = _compiled()
    x = hidden_states.contiguous()
    act = torch.empty((x.shape[0], F), dtype=torch.float32, device=x.device)
    up(x, proj_in_weight.contiguous(), proj_in_bias.contiguous(), act)
    out = torch.empty((x.shape[0], D), dtype=torch.float32, device=x.device)
    down(act, proj_out_weight.contiguous(), proj_out_bias.contiguous(), out)
    return out
