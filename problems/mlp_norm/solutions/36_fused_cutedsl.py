"""p36 rmsnorm_h128 — plan `fused`, CuTe DSL: one kernel, nothing eager but the output allocation.

Plan: a half-warp owns one row of 128 bf16: 16 threads × 8 bf16, each thread one 16-byte vector load
of x, one of the weight slice (cached) and one 16-byte store (the tensors are compiled with 16-byte
alignment so CuTe emits 128-bit vector loads and stores). The float32 sum of squares is reduced over
the 16 lanes with butterfly shuffles; no shared memory, no barrier. 256 threads = 16 rows per CTA, grid = ceil(rows/16)
with a row guard. The batch dimension is symbolic, so one compilation (cached at module level) serves
every batch size; the compiled function takes torch tensors directly through TVM FFI.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor

HIDDEN = 128
VEC = 8  # bf16 per 16-byte access
LANES = HIDDEN // VEC  # threads per row
THREADS = 256
ROWS_PER_CTA = THREADS // LANES
EPS = 1e-6


@cute.kernel
def _rmsnorm_kernel(mX: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    rows = cute.size(mX, mode=[0])
    row = bidx * ROWS_PER_CTA + tidx // LANES
    seg = tidx % LANES
    # ((1, VEC), (rows, LANES)): one 16-byte vector per (row, lane)
    gX = cute.zipped_divide(mX, (1, VEC))
    gY = cute.zipped_divide(mY, (1, VEC))
    gW = cute.zipped_divide(mW, (VEC,))
    rX = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    rX.fill(0.0)
    rW = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    cute.autovec_copy(gW[(None,), (seg,)], rW)
    if row < rows:
        cute.autovec_copy(gX[(0, None), (row, seg)], rX)
    x = rX.load().to(cutlass.Float32)
    w = rW.load().to(cutlass.Float32)
    ss = (x * x).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), reduction_profile=0)
    # every lane of the warp shuffles (the guard only zeroed data), so full-mask shuffles are safe
    for i in cutlass.range_constexpr(4):
        ss = ss + cute.arch.shuffle_sync_bfly(ss, offset=LANES >> (i + 1))
    inv = cute.math.rsqrt(ss * cutlass.Float32(1.0 / HIDDEN) + cutlass.Float32(EPS))
    rY = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    rY.store(((x * inv) * w).to(cutlass.BFloat16))
    if row < rows:
        cute.autovec_copy(rY, gY[(0, None), (row, seg)])


@cute.jit
def _rmsnorm(mX: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor):
    rows = cute.size(mX, mode=[0])
    _rmsnorm_kernel(mX, mW, mY).launch(grid=[(rows + ROWS_PER_CTA - 1) // ROWS_PER_CTA, 1, 1], block=[THREADS, 1, 1])


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        rows = cute.sym_int()
        x = make_fake_compact_tensor(cutlass.BFloat16, (rows, HIDDEN), stride_order=(1, 0), assumed_align=16)
        w = make_fake_compact_tensor(cutlass.BFloat16, (HIDDEN,), assumed_align=16)
        y = make_fake_compact_tensor(cutlass.BFloat16, (rows, HIDDEN), stride_order=(1, 0), assumed_align=16)
        _COMPILED.append(cute.compile(_rmsnorm, x, w, y, options="--enable-tvm-ffi"))
    return _COMPILED[0]


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    kernel = _compiled()
    x = hidden_states.contiguous()
    out = torch.empty_like(x)
    kernel(x, weight.contiguous(), out)
    return out
