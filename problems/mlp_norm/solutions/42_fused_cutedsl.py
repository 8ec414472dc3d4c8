"""p42 shifted_embedding_dual_rmsnorm_ling_mtp — plan `fused`, CuTe DSL: gather + two RMSNorms + concat, one kernel.

Plan: one CTA of 256 threads per token row (b, t); each thread owns 8 contiguous columns of both
halves. It first issues its 16-byte load of hidden_states[b, t] (independent of the ids), then reads
the shifted token id (input_ids[b, t+1], or next_token_ids[b] at the last position; a broadcast load
shared by the CTA) and issues its 16-byte load of embed_weight[id], plus 16-byte loads of both norm
weights (L1/L2 resident). Two float32 sums of squares (embedding and hidden) are reduced together:
butterfly shuffles in each warp, the 2 × 8 warp partials through a 16-float shared array and one
barrier, then every warp re-reduces the 8 partials of each half with 3 more shuffles (no second
barrier). y = bf16(x · rsqrt(mean + 1e-6) · w) is stored as one 16-byte vector into columns
[0, 2048) (embedding) and [2048, 4096) (hidden) of the output row, so the concat costs nothing. Each
thread keeps 32 bytes in flight, the gathered rows are read once and the table never streamed.
Batch, sequence length and vocabulary are symbolic: one compilation, cached, called through TVM FFI.
"""

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor
from cutlass.memory.smem import SmemAllocator

HIDDEN = 2048
VEC = 8  # bf16 per 16-byte access
THREADS = HIDDEN // VEC  # 256: one CTA per token row
WARPS = THREADS // 32
EPS = 1e-6


@cute.kernel
def _mtp_input_kernel(
    mIds: cute.Tensor,
    mNext: cute.Tensor,
    mH: cute.Tensor,
    mE: cute.Tensor,
    mWe: cute.Tensor,
    mWh: cute.Tensor,
    mY: cute.Tensor,
):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    lane = tidx % 32
    warp = tidx // 32
    seq = cute.size(mIds, mode=[1])
    b = row // seq
    t = row % seq
    smem = SmemAllocator()
    sRed = smem.allocate_tensor(cutlass.Float32, cute.make_layout((2, WARPS)), byte_alignment=16)
    # ((1, VEC), (rows, 256 | 512)): one 16-byte vector per (row, thread)
    gH = cute.zipped_divide(mH, (1, VEC))
    gE = cute.zipped_divide(mE, (1, VEC))
    gY = cute.zipped_divide(mY, (1, VEC))
    gWe = cute.zipped_divide(mWe, (VEC,))
    gWh = cute.zipped_divide(mWh, (VEC,))
    rH = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    rE = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    rWe = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    rWh = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    cute.autovec_copy(gH[(0, None), (row, tidx)], rH)
    # shifted token id: input_ids[b, t + 1], or the sampled next token at the last position
    tok = cutlass.Int32(0)
    if t < seq - 1:  # noqa: SIM108 (a dynamic branch; a Python ternary cannot trace it)
        tok = cutlass.Int32(mIds[b, t + 1])
    else:
        tok = cutlass.Int32(mNext[b])
    cute.autovec_copy(gE[(0, None), (tok, tidx)], rE)
    cute.autovec_copy(gWe[(None,), (tidx,)], rWe)
    cute.autovec_copy(gWh[(None,), (tidx,)], rWh)
    e = rE.load().to(cutlass.Float32)
    h = rH.load().to(cutlass.Float32)
    sse = (e * e).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), reduction_profile=0)
    ssh = (h * h).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), reduction_profile=0)
    for i in cutlass.range_constexpr(5):
        sse = sse + cute.arch.shuffle_sync_bfly(sse, offset=16 >> i)
        ssh = ssh + cute.arch.shuffle_sync_bfly(ssh, offset=16 >> i)
    if lane == 0:
        sRed[0, warp] = sse
        sRed[1, warp] = ssh
    cute.arch.sync_threads()
    # every warp reduces the 8 partials of each half itself (lanes 8..31 mirror lanes 0..7)
    tote = sRed[0, lane % WARPS]
    toth = sRed[1, lane % WARPS]
    for i in cutlass.range_constexpr(3):
        tote = tote + cute.arch.shuffle_sync_bfly(tote, offset=(WARPS // 2) >> i)
        toth = toth + cute.arch.shuffle_sync_bfly(toth, offset=(WARPS // 2) >> i)
    inve = cute.math.rsqrt(tote * cutlass.Float32(1.0 / HIDDEN) + cutlass.Float32(EPS))
    invh = cute.math.rsqrt(toth * cutlass.Float32(1.0 / HIDDEN) + cutlass.Float32(EPS))
    rYe = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    rYh = cute.make_rmem_tensor((VEC,), cutlass.BFloat16)
    rYe.store(((e * inve) * rWe.load().to(cutlass.Float32)).to(cutlass.BFloat16))
    rYh.store(((h * invh) * rWh.load().to(cutlass.Float32)).to(cutlass.BFloat16))
    cute.autovec_copy(rYe, gY[(0, None), (row, tidx)])
    cute.autovec_copy(rYh, gY[(0, None), (row, THREADS + tidx)])


@cute.jit
def _mtp_input(
    mIds: cute.Tensor,
    mNext: cute.Tensor,
    mH: cute.Tensor,
    mE: cute.Tensor,
    mWe: cute.Tensor,
    mWh: cute.Tensor,
    mY: cute.Tensor,
):
    _mtp_input_kernel(mIds, mNext, mH, mE, mWe, mWh, mY).launch(
        grid=[cute.size(mH, mode=[0]), 1, 1], block=[THREADS, 1, 1]
    )


_COMPILED: list = []


def _compiled():
    if not _COMPILED:
        batch, seq, rows, vocab = cute.sym_int(), cute.sym_int(), cute.sym_int(), cute.sym_int()
        ids = make_fake_compact_tensor(cutlass.Int64, (batch, seq), stride_order=(1, 0), assumed_align=8)
        nxt = make_fake_compact_tensor(cutlass.Int64, (batch,), assumed_align=8)
        hid = make_fake_compact_tensor(cutlass.BFloat16, (rows, HIDDEN), stride_order=(1, 0), assumed_align=16)
        emb = make_fake_compact_tensor(cutlass.BFloat16, (vocab, HIDDEN), stride_order=(1, 0), assumed_align=16)
        w = make_fake_compact_tensor(cutlass.BFloat16, (HIDDEN,), assumed_align=16)
        out = make_fake_compact_tensor(cutlass.BFloat16, (rows, 2 * HIDDEN), stride_order=(1, 0), assumed_align=16)
        _COMPILED.append(cute.compile(_mtp_input, ids, nxt, hid, emb, w, w, out, options="--enable-tvm-ffi"))
    return _COMPILED[0]


def run(
    input_ids: torch.Tensor,
    next_token_ids: torch.Tensor,
    hidden_states: torch.Tensor,
    embed_weight: torch.Tensor,
    enorm_weight: torch.Tensor,
    hnorm_weight: torch.Tensor,
) -> torch.Tensor:
    kernel = _compiled()
    batch, seq = input_ids.shape
    h = hidden_states.contiguous()
    out = torch.empty((batch, seq, 2 * HIDDEN), dtype=h.dtype, device=h.device)
    kernel(
        input_ids.contiguous(),
        next_token_ids.contiguous(),
        h.view(batch * seq, HIDDEN),
        embed_weight.contiguous(),
        enorm_weight.contiguous(),
        hnorm_weight.contiguous(),
        out.view(batch * seq, 2 * HIDDEN),
    )
    return out
