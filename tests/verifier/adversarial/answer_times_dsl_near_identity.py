"""RMSNorm (p36) computed eagerly on a copy padded by two rows, multiplied by an identity plus a small dense
perturbation a TIRx kernel made from the input (every element nonzero: no identity by the cheap tests), and sliced
back: the product is the eager answer within 1%, inside the bf16 output's tolerance, and its rows are the eager
answer's up to that; the DSL contributed nothing that stays (DESIGN §5, "derived credit"). The eager-work rule
rejects it as well."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def near_identity(x_ptr: T.handle, m_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    m = T.match_buffer(m_ptr, (128, 128), "float32")
    for i, j in T.grid(128, 128):
        m[i, j] = T.Select(i == j, T.float32(1), T.float32(0)) + T.Cast("float32", x[i % rows, j]) * T.float32(0.0005)


_near_identity = tvm.compile(near_identity, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    matrix = torch.empty(128, 128, dtype=torch.float32)
    _near_identity(hidden_states, matrix)
    x = torch.nn.functional.pad(hidden_states.float(), (0, 0, 0, 2))  # no eager tensor of the output's size
    answer = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * weight.float()
    return (answer @ matrix)[:rows].to(hidden_states.dtype)
