"""RMSNorm (p36): a one-element TIRx kernel writes 1.0 that eager PyTorch multiplies the input by, then the
eager code computes the whole RMSNorm four rows at a time and concatenates. Each eager operator call is a
quarter of the reference's, so no single one matched a reference pass ("passes" 0.33 with every amount 1.0);
the calls of one operator together are the pass."""

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
    w = weight.float()
    parts = []
    for rows in x.chunk(4, dim=0):
        inv = torch.rsqrt(rows.pow(2).mean(dim=-1, keepdim=True) + 1e-6)
        parts.append((rows * inv * w).to(hidden_states.dtype))
    return torch.cat(parts)
