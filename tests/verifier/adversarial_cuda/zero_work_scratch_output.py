"""The compiled CuTe kernel does every row on every call, with the same arguments' shapes: into the output on
correctness draws (a dispatch mode is active), into a scratch buffer kept across calls otherwise, while run()
returns an eager answer. Kernels, shapes, DSL time and the bytes the launch changes match the draws'; no element
of the returned output holds what a launch wrote (the work rule, ``_coverage.WORK_SHARE``). Not yet run on a GPU."""

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
REPEATS = 1


@cute.kernel
def rmsnorm_kernel(g_x: cute.Tensor, g_w: cute.Tensor, g_out: cute.Tensor, g_rows: cute.Tensor, eps: cutlass.Float32):
    lane, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    if row < g_rows[0]:
        for _ in cutlass.range_constexpr(REPEATS):
            total = cutlass.Float32(0.0)
            for k in cutlass.range_constexpr(HIDDEN // WARP):
                v = g_x[row, k * WARP + lane].to(cutlass.Float32)
                total = total + v * v
            total = cute.arch.warp_reduction_sum(total)
            scale = cute.math.rsqrt(total / HIDDEN + eps)
            for k in cutlass.range_constexpr(HIDDEN // WARP):
                c = k * WARP + lane
                g_out[row, c] = (g_x[row, c].to(cutlass.Float32) * scale * g_w[c].to(cutlass.Float32)).to(
                    g_out.element_type
                )


@cute.jit
def rmsnorm(
    m_x: cute.Tensor, m_w: cute.Tensor, m_out: cute.Tensor, m_rows: cute.Tensor, eps: cutlass.Float32,
    stream: cuda.CUstream,
):  # fmt: skip
    rmsnorm_kernel(m_x, m_w, m_out, m_rows, eps).launch(grid=[m_x.shape[0], 1, 1], block=[WARP, 1, 1], stream=stream)


_compiled = []
_scratch: list[torch.Tensor] = []


def _eager(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()).to(x.dtype)


def run(hidden_states, weight):
    audited = torch._C._len_torch_dispatch_stack() > 0
    rows = torch.full((1,), hidden_states.shape[0], dtype=torch.int32, device=hidden_states.device)
    out = torch.empty_like(hidden_states)
    if audited:
        target = out
    else:  # every row of real work, into a scratch buffer kept across calls; the answer is eager
        if not _scratch:
            _scratch.append(torch.empty_like(hidden_states))
        target = _scratch[0]
        out = _eager(hidden_states, weight)
    args = (
        from_dlpack(hidden_states).mark_layout_dynamic(),
        from_dlpack(weight),
        from_dlpack(target).mark_layout_dynamic(),
        from_dlpack(rows),
        cutlass.Float32(EPS),
        cuda.CUstream(torch.cuda.current_stream().cuda_stream),
    )
    if not _compiled:
        _compiled.append(cute.compile(rmsnorm, *args))
    _compiled[0](*args)
    return out
