"""RMSNorm computed eagerly with fewer operators than the reference (a vector norm for the sum of squares, the
row factor and the weight folded together), a one-element kernel's 1.0 multiplied into the weight: a fused
operator is priced as the passes it makes over the data."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def one(a_ptr: T.handle):
    a = T.match_buffer(a_ptr, (1,), "float32")
    a[0] = T.float32(1)


_one = tvm.compile(one, target="llvm")


def run(hidden_states, weight):
    seed = torch.empty(1, dtype=torch.float32)
    _one(seed)
    k = hidden_states.shape[-1]
    x = hidden_states.float()
    n = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    return (x * torch.rsqrt(n * n / k + 1e-6) * (weight.float() * seed)).to(hidden_states.dtype)
