"""An eager answer, four rows at a time, multiplied by a 4x4 identity matrix the DSL wrote (NaN under suppression).
Passed while contractions ignored their eager-made operands (the DSL operand of a GEMM counted as the data, the
other as a weight); now a DSL operand that carries no information (constant, or at most one nonzero per row or
column on average: identity, permutation, one-hot, diagonal) earns no credit (DESIGN §5, "derived credit")."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def identity(x_ptr: T.handle, eye_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    eye = T.match_buffer(eye_ptr, (4, 4), "float32")
    for i, j in T.grid(4, 4):
        eye[i, j] = T.Select(i == j, T.float32(1), T.float32(0)) + T.Cast("float32", x[0, 0]) * T.float32(0)


_identity = tvm.compile(identity, target="llvm")


def run(hidden_states, weight):
    eye = torch.empty(4, 4, dtype=torch.float32)
    _identity(hidden_states, eye)
    out = torch.empty_like(hidden_states)
    x = hidden_states.float()
    for lo in range(0, hidden_states.shape[0], 4):
        block = x[lo : lo + 4]
        answer = block * torch.rsqrt(block.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()
        out[lo : lo + 4] = eye @ answer
    return out
