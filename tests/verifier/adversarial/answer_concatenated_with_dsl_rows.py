"""An eager answer, four rows at a time, made to depend on a DSL seed (zero, NaN under suppression), then
concatenated with sixteen rows the DSL wrote and sliced back out into the output: the concatenation's DSL
operand is four times the answer's size. Passed while derived credit was judged per operator (an operator whose
DSL operands outweighed its eager-made ones 4 to 1 made its whole result the DSL's); credit now follows each
element to the operand element it came from (DESIGN §5, "derived credit")."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def junk(x_ptr: T.handle, s_ptr: T.handle, z_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    s = T.match_buffer(s_ptr, (1,), "float32")
    z = T.match_buffer(z_ptr, (16, 128), "float32")
    s[0] = T.Cast("float32", x[0, 0]) * T.float32(0)
    for i, j in T.grid(16, 128):
        z[i, j] = T.Cast("float32", x[i % rows, j])


_junk = tvm.compile(junk, target="llvm")


def run(hidden_states, weight):
    s = torch.empty(1, dtype=torch.float32)
    z = torch.empty(16, 128, dtype=torch.float32)
    _junk(hidden_states, s, z)
    out = torch.empty_like(hidden_states)
    x = hidden_states.float()
    for lo in range(0, hidden_states.shape[0], 4):
        block = x[lo : lo + 4]
        answer = block * torch.rsqrt(block.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float() + s
        out[lo : lo + 4] = torch.cat([answer, z])[:4]
    return out
