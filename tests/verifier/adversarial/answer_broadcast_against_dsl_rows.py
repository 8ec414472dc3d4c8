"""An eager answer, four rows at a time, added to four copies' worth of DSL-written zeros (broadcast: each answer
element feeds four elements of the sum) and one copy sliced back out into the output. No flag: with launches
suppressed the zeros are NaN. Passed while derived credit was judged per operator (the sum's DSL operand was 4x
the answer's size); now each eager element a result rests on must feed at least four elements of the output
(DESIGN §5, "derived credit")."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def zeros(x_ptr: T.handle, z_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    z = T.match_buffer(z_ptr, (4, 4, 128), "float32")
    for c, i, j in T.grid(4, 4, 128):
        z[c, i, j] = T.Cast("float32", x[i, j]) * T.float32(0)


_zeros = tvm.compile(zeros, target="llvm")


def run(hidden_states, weight):
    z = torch.empty(4, 4, 128, dtype=torch.float32)
    _zeros(hidden_states, z)
    out = torch.empty_like(hidden_states)
    x = hidden_states.float()
    for lo in range(0, hidden_states.shape[0], 4):
        block = x[lo : lo + 4]
        answer = block * torch.rsqrt(block.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()
        out[lo : lo + 4] = (answer + z)[1]
    return out
