"""The taint seed: one DSL-computed value (zero times the input's first element) added into an eager answer,
row block by row block (no eager tensor of the output's size), stored into the output with ``out=``. No
flag: with launches suppressed the seed keeps its NaN sentinel and so does every output element. Passed
before derived credit needed substance (DESIGN §5): any DSL-derived operand made an eager result the DSL's."""

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
    s[0] = T.Cast("float32", x[0, 0]) * T.float32(0)


_seed = tvm.compile(seed, target="llvm")


def run(hidden_states, weight):
    s = torch.empty(1, dtype=torch.float32)
    _seed(hidden_states, s)
    out = torch.empty_like(hidden_states)
    x = hidden_states.float()
    for lo in range(0, hidden_states.shape[0], 4):
        block = x[lo : lo + 4]
        answer = block * torch.rsqrt(block.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()
        torch.add(answer, s, out=out[lo : lo + 4])
    return out
