"""A one-thread CuTe kernel writes 1.0 into a one-element buffer; eager PyTorch multiplies the input by it first and
computes the whole RMSNorm from the product (every output depends on the kernel, every eager value derives from
its result), so the DSL does none of the operator's work: the eager code does all of it."""

# expect: decorative_dsl
# problem: p36
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import from_dlpack

EPS = 1e-6


@cute.kernel
def one_kernel(g_seed: cute.Tensor):
    g_seed[0] = cutlass.Float32(1.0)


@cute.jit
def one(m_seed: cute.Tensor, stream: cuda.CUstream):
    one_kernel(m_seed).launch(grid=[1, 1, 1], block=[1, 1, 1], stream=stream)


_compiled = []


def run(hidden_states, weight):
    seed = torch.empty(1, dtype=torch.float32, device=hidden_states.device)
    args = (from_dlpack(seed), cuda.CUstream(torch.cuda.current_stream().cuda_stream))
    if not _compiled:
        _compiled.append(cute.compile(one, *args))
    _compiled[0](*args)
    x = hidden_states.float() * seed
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()).to(hidden_states.dtype)
