"""p32 swiglu_mlp_parakeet_fp32 — plan `fused`, CuTe DSL: a dual GEMM with the SwiGLU epilogue, then the down GEMM.

Plan: both GEMMs must keep float32 accuracy (TF32/bf16 tensor cores fall outside the allowance), so
they run on the float32 FMA units as classic register-tiled SIMT GEMMs C[M, N] = A[M, K] B[N, K]^T
(activations and nn.Linear weights are both K-contiguous). A CTA of 256 threads owns a 128 × 128
accumulator tile over K in stages of 16: per stage it loads the A and B slices with 16-byte loads (four
threads per 64-byte row piece: whole sectors), stores them k-major in shared memory (rows padded to 132
floats), double-buffered so the next slice's loads are in flight during the 16 rank-1 updates of this
one; each thread holds an 8 × 8 micro-tile as rows {4ty..4ty+3, 64+4ty..} × columns {4tx.., 64+4tx..}
(16-byte shared reads, broadcast or conflict-free) and does 64 FMAs per k. The 16 products of a stage
are summed into a partial before it is added to the accumulator: sequential float32 accumulation over
K = 4096 alone was 7× less accurate than a blocked CPU GEMM, past the allowance in the CPU emulation;
two levels bring it within it (64 more registers: one CTA of 8 warps per SM, 64 independent FMA chains
per thread). (1) gate/up: the B tile's columns 0..63 are gate_weight rows n0..n0+63 and 64..127
the same rows of up_weight, so each thread holds g and u of the same (token, feature) and the epilogue
writes a = silu(g + b_g)·(u + b_u) in float32 (precise exp and division; the 64 MB intermediate, read
back once by (2)). (2) down: out = a down_weight^T + b_d. The token count is symbolic and masked
(partial last row tile): one compilation per GEMM, cached, called through TVM FFI.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor
from cutlass.memory.smem import SmemAllocator

D = 1024  # hidden size
F = 4096  # ffn size
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
def _gemm_kernel(
    mA: cute.Tensor, mB: cute.Tensor, mB2: cute.Tensor, mBias: cute.Tensor, mBias2: cute.Tensor, mC: cute.Tensor,
    swiglu: cutlass.Constexpr,
):  # fmt: skip
    M = cute.size(mA, mode=[0])
    K = cute.size(mA, mode=[1])
    n_out = cute.size(mC, mode=[1])
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    tile_n = BN // 2 if swiglu else BN
    grid_n = n_out // tile_n
    m0 = (bidx // grid_n) * BM
    n0 = (bidx % grid_n) * tile_n
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
    gB2 = cute.zipped_divide(mB2, (1, 4))
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
                if cutlass.const_expr(swiglu):
                    if lrow < BN // 2:
                        cute.autovec_copy(gB[(0, None), (n0 + lrow, (kt * BK + lk) // 4)], lb[None, q])
                    else:
                        cute.autovec_copy(gB2[(0, None), (n0 + lrow - BN // 2, (kt * BK + lk) // 4)], lb[None, q])
                else:
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
            if cutlass.const_expr(swiglu):
                for j in cutlass.range_constexpr(4):
                    n = n0 + tn * 4 + j
                    g = acc[i, j] + mBias[n]
                    ov[j] = g / (cutlass.Float32(1.0) + cute.math.exp(-g)) * (acc[i, 4 + j] + mBias2[n])
                cute.autovec_copy(ov, gC[(0, None), (m, (n0 + tn * 4) // 4)])
            else:
                for h in cutlass.range_constexpr(2):
                    for j in cutlass.range_constexpr(4):
                        ov[j] = acc[i, h * 4 + j] + mBias[n0 + h * HALF + tn * 4 + j]
                    cute.autovec_copy(ov, gC[(0, None), (m, (n0 + h * HALF + tn * 4) // 4)])


@cute.jit
def _gemm(
    mA: cute.Tensor, mB: cute.Tensor, mB2: cute.Tensor, mBias: cute.Tensor, mBias2: cute.Tensor, mC: cute.Tensor,
    swiglu: cutlass.Constexpr,
):  # fmt: skip
    M = cute.size(mA, mode=[0])
    tile_n = BN // 2 if swiglu else BN
    grid = ((M + BM - 1) // BM) * (cute.size(mC, mode=[1]) // tile_n)
    _gemm_kernel(mA, mB, mB2, mBias, mBias2, mC, swiglu).launch(
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
        _COMPILED.append(cute.compile(_gemm, x, w_in, w_in, b_in, b_in, act, True, options=opts))
        _COMPILED.append(cute.compile(_gemm, act, w_out, w_out, b_out, b_out, out, False, options=opts))
    return _COMPILED


def run(
    hidden_states: torch.Tensor,
    gate_weight: torch.Tensor,
    gate_bias: torch.Tensor,
    up_weight: torch.Tensor,
    up_bias: torch.Tensor,
    down_weight: torch.Tensor,
    down_bias: torch.Tensor,
) -> torch.Tensor:
    gate_up, down = _compiled()
    x = hidden_states.contiguous()
    act = torch.empty((x.shape[0], F), dtype=torch.float32, device=x.device)
    gate_up(x, gate_weight.contiguous(), up_weight.contiguous(), gate_bias.contiguous(), up_bias.contiguous(), act)
    out = torch.empty((x.shape[0], D), dtype=torch.float32, device=x.device)
    down_bias = down_bias.contiguous()
    down(act, down_weight.contiguous(), down_weight, down_bias, down_bias, out)  # B2 / bias2 unused here
    return out
