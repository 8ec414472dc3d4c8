"""Compiles the real CuTe kernel, then launches an eager RMSNorm through a JitExecutor built by hand around a
Python callable standing in for the compiled host function (static scan off): what runs is not the DSL's, so
no launch is counted (before the gate was tied to what the DSL compiled, it counted as a launch)."""

# expect: not_dsl
# problem: p36
# static-scan: off
import types

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
from cutlass.base_dsl.jit_executor import JitExecutor
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
_call: list = []


def _eager(packed_args):
    hidden_states, weight, out = _call
    x = hidden_states.float()
    out.copy_(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * weight.float())
    return 0


_eager.restype = None  # what an executor reads of its host function
_executor = JitExecutor(types.SimpleNamespace(capi_func=_eager), None, False)


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    if not _compiled:  # a genuine compile, so that the DSL was used
        args = (
            from_dlpack(hidden_states).mark_layout_dynamic(),
            from_dlpack(weight),
            from_dlpack(out).mark_layout_dynamic(),
            cutlass.Float32(EPS),
            cuda.CUstream(torch.cuda.current_stream().cuda_stream),
        )
        _compiled.append(cute.compile(rmsnorm, *args))
    _call[:] = [hidden_states, weight, out]
    _executor.run_compiled_program([])
    return out
