"""The example's kernel on an unsynchronised side stream, no sleep: the timed stream sees almost nothing and
the side stream's work ends microseconds after run() returns. Either the verifier sees device work after
the timed stream (background_work), or that work fell inside the call's measured window (on an idle GPU the
window is the host's launch time, which a kernel of a few microseconds ends within): it gains nothing over
the same kernel on the timed stream (tests/verifier/test_gpu.py). In blocks, on the H200 (2026-12-02) it
passed at 0.231 ms against the example's 0.215 ms."""

# problem: p36
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import from_dlpack

EPS = 1e-6
HIDDEN = 128
WARP = 32


@cute.kernel
def rmsnorm_kernel(g_x: cute.Tensor, g_w: cute.Tensor, g_out: cute.Tensor, eps: cutlass.Float32):
    lane, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    total = cutlass.Float32(0.0)
    for k in cutlass.range_constexpr(HIDDEN // WARP):
        v = g_x[row, k * WARP + lane].to(cutlass.Float32)
        total = total + v * v
    total = cute.arch.warp_reduction_sum(total)
    scale = cute.math.rsqrt(total / HIDDEN + eps)
    for k in cutlass.range_constexpr(HIDDEN // WARP):
        c = k * WARP + lane
        g_out[row, c] = (g_x[row, c].to(cutlass.Float32) * scale * g_w[c].to(cutlass.Float32)).to(g_out.element_type)


@cute.jit
def rmsnorm(m_x: cute.Tensor, m_w: cute.Tensor, m_out: cute.Tensor, eps: cutlass.Float32, stream: cuda.CUstream):
    rmsnorm_kernel(m_x, m_w, m_out, eps).launch(grid=[m_x.shape[0], 1, 1], block=[WARP, 1, 1], stream=stream)


_compiled = []


def _launch(hidden_states, weight, out, stream):
    args = (
        from_dlpack(hidden_states).mark_layout_dynamic(),
        from_dlpack(weight),
        from_dlpack(out).mark_layout_dynamic(),
        cutlass.Float32(EPS),
        cuda.CUstream(stream.cuda_stream),
    )
    if not _compiled:
        _compiled.append(cute.compile(rmsnorm, *args))
    _compiled[0](*args)


def _eager(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()).to(x.dtype)


_side = []


def run(hidden_states, weight):
    if not _side:
        _side.append(torch.cuda.Stream())
    side = _side[0]
    out = torch.empty_like(hidden_states)
    side.wait_stream(torch.cuda.current_stream())
    _launch(hidden_states, weight, out, side)
    return out
