"""Fused residual add + RMSNorm at hidden size 4096 (p28) for the cuda backend: one CuTe DSL kernel,
one warp per row on PyTorch's current stream. Lanes stride the row (coalesced), accumulate the
squares of the float32 sum, reduce across the warp, then write the normalised row."""

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import from_dlpack

EPS = 1e-5
HIDDEN = 4096
WARP = 32


@cute.kernel
def fused_add_rmsnorm_kernel(
    g_h: cute.Tensor, g_r: cute.Tensor, g_w: cute.Tensor, g_out: cute.Tensor, eps: cutlass.Float32
):
    lane, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    total = cutlass.Float32(0.0)
    for k in cutlass.range(HIDDEN // WARP, unroll=8):
        c = k * WARP + lane
        v = g_h[row, c].to(cutlass.Float32) + g_r[row, c].to(cutlass.Float32)
        total = total + v * v
    total = cute.arch.warp_reduction_sum(total)
    scale = cute.math.rsqrt(total / HIDDEN + eps)
    for k in cutlass.range(HIDDEN // WARP, unroll=8):
        c = k * WARP + lane
        v = g_h[row, c].to(cutlass.Float32) + g_r[row, c].to(cutlass.Float32)
        g_out[row, c] = (v * scale * g_w[c].to(cutlass.Float32)).to(g_out.element_type)


@cute.jit
def fused_add_rmsnorm(
    m_h: cute.Tensor,
    m_r: cute.Tensor,
    m_w: cute.Tensor,
    m_out: cute.Tensor,
    eps: cutlass.Float32,
    stream: cuda.CUstream,
):
    kernel = fused_add_rmsnorm_kernel(m_h, m_r, m_w, m_out, eps)
    kernel.launch(grid=[m_h.shape[0], 1, 1], block=[WARP, 1, 1], stream=stream)


_compiled = []


def run(hidden_states: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(hidden_states)
    args = (
        from_dlpack(hidden_states).mark_layout_dynamic(),
        from_dlpack(residual).mark_layout_dynamic(),
        from_dlpack(weight),
        from_dlpack(out).mark_layout_dynamic(),
        cutlass.Float32(EPS),
        cuda.CUstream(torch.cuda.current_stream().cuda_stream),
    )
    if not _compiled:
        _compiled.append(cute.compile(fused_add_rmsnorm, *args))
    _compiled[0](*args)
    return out
