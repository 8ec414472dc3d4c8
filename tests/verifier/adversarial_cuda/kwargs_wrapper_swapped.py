"""Compiles the real CuTe kernel for TVM FFI, then replaces the compiled function's kwargs wrapper (the Python
that calls its native function) by an eager RMSNorm (static scan off): the compiled object is called as an honest
one would be, but no native code the DSL compiled runs, so no launch is counted (before the gate was tied to
what the DSL compiled, the compiled class's own __call__ counted as a launch)."""

# expect: not_dsl
# problem: p36
# static-scan: off
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor

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
def rmsnorm(m_x: cute.Tensor, m_w: cute.Tensor, m_out: cute.Tensor):
    rmsnorm_kernel(m_x, m_w, m_out, cutlass.Float32(EPS)).launch(grid=[m_x.shape[0], 1, 1], block=[WARP, 1, 1])


def _eager(hidden_states, weight, out):
    x = hidden_states.float()
    out.copy_(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * weight.float())


_compiled = []


def run(hidden_states, weight):
    if not _compiled:
        rows = cute.sym_int()
        x = make_fake_compact_tensor(cutlass.BFloat16, (rows, HIDDEN), stride_order=(1, 0), assumed_align=16)
        w = make_fake_compact_tensor(cutlass.BFloat16, (HIDDEN,), assumed_align=16)
        compiled = cute.compile(rmsnorm, x, w, x, options="--enable-tvm-ffi")
        compiled._kwargs_wrapper = _eager
        _compiled.append(compiled)
    out = torch.empty_like(hidden_states)
    _compiled[0](hidden_states, weight, out)
    return out
