"""Tells a correctness draw from a timed call by the dispatch mode active there; runs the CuTe kernel on
every row then, and on timed calls the same compiled kernel on one row while torch computes the rest:
the timed calls launch the kernel on other shapes (and for far less time) than the draws did."""

# expect: decorative_dsl
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


def run(hidden_states, weight):
    stream = torch.cuda.current_stream()
    out = torch.empty_like(hidden_states)
    if torch._C._len_torch_dispatch_stack() > 0:
        _launch(hidden_states, weight, out, stream)
        return out
    out.copy_(_eager(hidden_states, weight))
    _launch(hidden_states[:1], weight, out[:1], stream)
    return out
