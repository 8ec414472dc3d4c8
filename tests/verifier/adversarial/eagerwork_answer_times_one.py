"""A one-element DSL kernel writes 1.0; eager PyTorch multiplies the input by it first and computes the whole
RMSNorm from the product. Every output depends on the kernel (NaN when it is suppressed) and every eager
value derives from its result, but the DSL does none of the operator's work: the eager code does all of it."""

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
    x = hidden_states.float() * seed
    inv = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6)
    return (x * inv * weight.float()).to(hidden_states.dtype)
