"""A one-element DSL value (one, computed from the input's first element) multiplied into the cast input; eager
code computes RMSNorm from the product, four rows at a time, into the output with ``out=``. The cast input is no
eager-made operand (the honest per-row plan needs that), so the product and everything computed from it was the
DSL's (passed before). A constant carries no information: it derives nothing (DESIGN §5, derived credit)."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def seed(x_ptr: T.handle, s_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    s = T.match_buffer(s_ptr, (1,), "float32")
    s[0] = T.Cast("float32", x[0, 0]) * T.float32(0) + T.float32(1)


_seed = tvm.compile(seed, target="llvm")


def run(hidden_states, weight):
    s = torch.empty(1, dtype=torch.float32)
    _seed(hidden_states, s)
    x = hidden_states.float() * s
    w = weight.float() * s
    out = torch.empty_like(hidden_states)
    for lo in range(0, hidden_states.shape[0], 4):
        block = x[lo : lo + 4]
        torch.mul(block * torch.rsqrt(block.pow(2).mean(-1, keepdim=True) + 1e-6), w, out=out[lo : lo + 4])
    return out
