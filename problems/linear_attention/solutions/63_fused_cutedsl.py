"""p63 mamba2_selective_scan_nemotron_h — plan `fused`, CuTe DSL: the selective scan in one kernel, state in registers.

Plan: the rows of a head's state h [P=64, N=128] evolve independently (h_pn = decay h_pn + dt' x_p B_n,
y_p = sum_n h_pn C_n + D x_p), so one CTA of 256 threads owns one (sequence, head) (grid = batch × 128
heads = 1024 CTAs, four per SM) and 4 consecutive lanes share a row p, each holding 32 of its state
values in registers for all seq_len steps: h crosses HBM once in and once out, and x, dt, B, C once
(the compulsory traffic; B and C are read by the 16 heads of their group, from L2). A lane holds state
columns 16m + 4·(lane % 4) + 0..3, so the 4 lanes of a row read 64 consecutive bytes of B and C from
shared memory (no bank conflict). Per step and state element: h = h·decay + (x dt')·B (a multiply and an
FMA), y += h·C (an FMA); a width-4 butterfly completes y, which no later step needs. The state path
stays float32 (the tolerance allows no bf16/tf32 products there): the kernel is bound by float32 math,
3 operations per state element per step. Inputs arrive in chunks of 8 tokens staged in shared memory
(B, C, x as float32; dt' = softplus(dt + dt_bias) with softplus = x above 20, else log1p(exp(x)), and
decay = exp(dt' A) with precise math, once per token) right after the previous chunk is computed, while
the other CTAs of the SM compute. Outputs of a chunk are gathered in shared memory and written as
16-byte stores. Batch and seq_len are symbolic: one compilation, cached, called through TVM FFI.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor
from cutlass.memory.smem import SmemAllocator

H = 128  # heads
P = 64  # head dim (state rows)
N = 128  # state size (state columns)
G = 8  # groups of B / C
HPG = H // G  # heads per group
THREADS = 256
TPR = 4  # threads per state row
COLS = N // TPR  # state values per thread (32)
RSTRIDE = TPR * 4  # columns between a lane's groups of 4
TC = 8  # tokens per staged chunk
VEC = 8  # bf16 per 16-byte access
BC_SEGS = N // VEC  # 16-byte segments of a token's B (or C) row (16)
BC_THREADS = TC * BC_SEGS  # threads loading B; as many load C (128)
X_SEGS = P // VEC  # 16-byte segments of a token's x / y row (8)
X_THREADS = TC * X_SEGS  # threads loading x / storing y (64)
SOFTPLUS_THRESHOLD = 20.0
CTAS_PER_SM = 4


@cute.kernel
def _scan_kernel(
    mX: cute.Tensor, mDt: cute.Tensor, mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, mD: cute.Tensor,
    mBias: cute.Tensor, mS0: cute.Tensor, mY: cute.Tensor, mSF: cute.Tensor,
):  # fmt: skip
    seq_len = cute.size(mX, mode=[1])
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    b = bidx // H
    h = bidx % H
    g = h // HPG
    row = tidx // TPR
    c0 = (tidx % TPR) * 4
    smem = SmemAllocator()
    sB = smem.allocate_tensor(cutlass.Float32, cute.make_layout((TC, N), stride=(N, 1)), byte_alignment=16)
    sC = smem.allocate_tensor(cutlass.Float32, cute.make_layout((TC, N), stride=(N, 1)), byte_alignment=16)
    sX = smem.allocate_tensor(cutlass.Float32, cute.make_layout((TC, P), stride=(P, 1)), byte_alignment=16)
    sDt = smem.allocate_tensor(cutlass.Float32, cute.make_layout((TC,)), byte_alignment=16)  # dt'
    sDec = smem.allocate_tensor(cutlass.Float32, cute.make_layout((TC,)), byte_alignment=16)  # exp(dt' A)
    sY = smem.allocate_tensor(cutlass.BFloat16, cute.make_layout((TC, P), stride=(P, 1)), byte_alignment=16)
    gB = cute.zipped_divide(mB, (1, 1, 1, VEC))  # ((1,1,1,8), (B, T, G, 16))
    gC = cute.zipped_divide(mC, (1, 1, 1, VEC))
    gX = cute.zipped_divide(mX, (1, 1, 1, VEC))  # ((1,1,1,8), (B, T, H, 8))
    gY = cute.zipped_divide(mY, (1, 1, 1, VEC))
    tB = cute.zipped_divide(sB, (1, 4))  # ((1,4), (TC, 32))
    tC = cute.zipped_divide(sC, (1, 4))
    tX = cute.zipped_divide(sX, (1, 4))  # ((1,4), (TC, 16))
    tY = cute.zipped_divide(sY, (1, VEC))  # ((1,8), (TC, 8))
    st = cute.make_rmem_tensor((COLS,), cutlass.Float32)
    for r in cutlass.range_constexpr(COLS):
        st[r] = mS0[b, h, row, (r // 4) * RSTRIDE + c0 + r % 4]
    vr = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    f4 = cute.make_rmem_tensor((4,), cutlass.Float32)
    bv = cute.make_rmem_tensor((4,), cutlass.Float32)
    cv = cute.make_rmem_tensor((4,), cutlass.Float32)
    yv = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    n_chunks = (seq_len + TC - 1) // TC
    # iteration it: compute chunk it - 1 from shared memory, write its outputs, then stage chunk it
    # (loaded there and then: the other CTAs on the SM cover the wait, and no prefetched values stay
    # live in registers across the compute)
    for it in cutlass.range(n_chunks + 1, unroll=1):
        if it > 0:
            steps = cutlass.min(TC, seq_len - (it - 1) * TC)
            for t in cutlass.range(steps, unroll=1):
                xdt = sX[t, row] * sDt[t]
                dec = sDec[t]
                acc = cutlass.Float32(0.0)
                for m in cutlass.range_constexpr(COLS // 4):
                    cute.autovec_copy(tB[(0, None), (t, m * TPR + c0 // 4)], bv)
                    cute.autovec_copy(tC[(0, None), (t, m * TPR + c0 // 4)], cv)
                    for e in cutlass.range_constexpr(4):
                        st[m * 4 + e] = st[m * 4 + e] * dec + xdt * bv[e]
                        acc = acc + st[m * 4 + e] * cv[e]
                for i in cutlass.range_constexpr(2):  # width-4 butterfly: offsets 2, 1
                    acc = acc + cute.arch.shuffle_sync_bfly(acc, offset=2 >> i)
                if tidx % TPR == 0:
                    sY[t, row] = (acc + mD[h] * sX[t, row]).to(cutlass.BFloat16)
        cute.arch.sync_threads()
        if it > 0:
            ty = (it - 1) * TC + tidx // X_SEGS
            if tidx < X_THREADS:  # noqa: SIM102 (dynamic conditions, one per if)
                if ty < seq_len:
                    cute.autovec_copy(tY[(0, None), (tidx // X_SEGS, tidx % X_SEGS)], yv)
                    cute.autovec_copy(yv, gY[(0, 0, 0, None), (b, ty, h, tidx % X_SEGS)])
        if it < n_chunks:
            # B (threads 0..127) and C (128..255): one 16-byte load each, stored as float32
            tb = it * TC + (tidx % BC_THREADS) // BC_SEGS
            vr.fill(0.0)
            if tb < seq_len:
                if tidx < BC_THREADS:
                    cute.autovec_copy(gB[(0, 0, 0, None), (b, tb, g, tidx % BC_SEGS)], vr)
                else:
                    cute.autovec_copy(gC[(0, 0, 0, None), (b, tb, g, tidx % BC_SEGS)], vr)
            for half in cutlass.range_constexpr(2):
                for e in cutlass.range_constexpr(4):
                    f4[e] = cutlass.Float32(vr[half * 4 + e])
                slot = (tidx % BC_THREADS) // BC_SEGS, (tidx % BC_SEGS) * 2 + half
                if tidx < BC_THREADS:
                    cute.autovec_copy(f4, tB[(0, None), slot])
                else:
                    cute.autovec_copy(f4, tC[(0, None), slot])
            if tidx < X_THREADS:
                vr.fill(0.0)
                if it * TC + tidx // X_SEGS < seq_len:
                    cute.autovec_copy(gX[(0, 0, 0, None), (b, it * TC + tidx // X_SEGS, h, tidx % X_SEGS)], vr)
                for half in cutlass.range_constexpr(2):
                    for e in cutlass.range_constexpr(4):
                        f4[e] = cutlass.Float32(vr[half * 4 + e])
                    cute.autovec_copy(f4, tX[(0, None), (tidx // X_SEGS, (tidx % X_SEGS) * 2 + half)])
            if tidx < TC:
                z = cutlass.Float32(0.0)
                if it * TC + tidx < seq_len:
                    z = cutlass.Float32(mDt[b, it * TC + tidx, h]) + mBias[h]
                sp = cute.math.log1p(cute.math.exp(z))
                if z > cutlass.Float32(SOFTPLUS_THRESHOLD):
                    sp = z
                sDt[tidx] = sp
                sDec[tidx] = cute.math.exp(sp * mA[h])
        cute.arch.sync_threads()
    for r in cutlass.range_constexpr(COLS):
        mSF[b, h, row, (r // 4) * RSTRIDE + c0 + r % 4] = st[r]


@cute.jit
def _scan(
    mX: cute.Tensor, mDt: cute.Tensor, mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, mD: cute.Tensor,
    mBias: cute.Tensor, mS0: cute.Tensor, mY: cute.Tensor, mSF: cute.Tensor,
):  # fmt: skip
    grid = cute.size(mX, mode=[0]) * H
    _scan_kernel(mX, mDt, mA, mB, mC, mD, mBias, mS0, mY, mSF).launch(
        grid=[grid, 1, 1],
        block=[THREADS, 1, 1],
        # __launch_bounds__(256, 4): at most 64 registers (32 hold the state), four CTAs per SM
        min_blocks_per_mp=CTAS_PER_SM,
        preferred_smem_carveout=100,
    )


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        batch, seq_len = cute.sym_int(), cute.sym_int()

        def compact(dtype, shape, align):
            order = tuple(range(len(shape) - 1, -1, -1))
            return make_fake_compact_tensor(dtype, shape, stride_order=order, assumed_align=align)

        x = compact(cutlass.BFloat16, (batch, seq_len, H, P), 16)
        dt = compact(cutlass.BFloat16, (batch, seq_len, H), 2)
        vec = compact(cutlass.Float32, (H,), 4)
        bc = compact(cutlass.BFloat16, (batch, seq_len, G, N), 16)
        state = compact(cutlass.Float32, (batch, H, P, N), 16)
        _COMPILED.append(cute.compile(_scan, x, dt, vec, bc, bc, vec, vec, state, x, state, options="--enable-tvm-ffi"))
    return _COMPILED[0]


def run(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor,
    dt_bias: torch.Tensor,
    initial_state: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    kernel = _compiled()
    y = torch.empty_like(x)
    final_state = torch.empty_like(initial_state)
    args = (x.contiguous(), dt.contiguous(), A.contiguous(), B.contiguous(), C.contiguous(), D.contiguous())
    kernel(*args, dt_bias.contiguous(), initial_state.contiguous(), y, final_state)
    return y, final_state
