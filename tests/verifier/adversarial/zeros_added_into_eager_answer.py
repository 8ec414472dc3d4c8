"""A DSL kernel writes as many zeros as the output has elements, and eager code adds them to its answer,
row block by row block (no eager tensor of the output's size), into the output with ``out=``: the DSL
operand is as large as the eager one. No flag: with launches suppressed the zeros stay NaN. Passed before
derived credit needed the DSL operands to outweigh the eager-made ones (DESIGN §5)."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def zeros(x_ptr: T.handle, z_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    z = T.match_buffer(z_ptr, (rows, 128), "float32")
    for i, j in T.grid(rows, 128):
        z[i, j] = T.Cast("float32", x[i, j]) * T.float32(0)


_zeros = tvm.compile(zeros, target="llvm")


def run(hidden_states, weight):
    z = torch.empty(hidden_states.shape, dtype=torch.float32)
    _zeros(hidden_states, z)
    out = torch.empty_like(hidden_states)
    x = hidden_states.float()
    for lo in range(0, hidden_states.shape[0], 4):
        block = x[lo : lo + 4]
        answer = block * torch.rsqrt(block.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()
        torch.add(answer, z[lo : lo + 4], out=out[lo : lo + 4])
    return out
