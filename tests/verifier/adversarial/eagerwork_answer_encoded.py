"""Eager PyTorch computes the whole RMSNorm in float32 on a copy padded by two rows (no eager tensor has the
output's size), encodes it as 3y + 1, and a TIRx kernel decodes (e - 1) / 3 into the float32 result that is
cast to the output. The DSL writes every element, and what eager code made holds none of the output's
values, but the DSL does no arithmetic of the operator: the eager code did all of it."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def decode(e_ptr: T.handle, y_ptr: T.handle):
    n = T.int32()
    e = T.match_buffer(e_ptr, (n,), "float32")
    y = T.match_buffer(y_ptr, (n,), "float32")
    for i in range(n):
        y[i] = (e[i] - T.float32(1)) / T.float32(3)


_decode = tvm.compile(decode, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    x = torch.nn.functional.pad(hidden_states.float(), (0, 0, 0, 2))
    y = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * weight.float()
    encoded = (y * 3 + 1)[:rows].reshape(-1)
    decoded = torch.empty(rows * hidden_states.shape[1], dtype=torch.float32)
    _decode(encoded, decoded)
    return decoded.view(hidden_states.shape).to(hidden_states.dtype)
