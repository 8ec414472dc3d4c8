"""Computes the whole RMSNorm in plain Python on the inputs' tolist(), encodes it as 3y + 1, lifts it into a
tensor with torch.tensor(list), and has a TIRx kernel decode it into the output. No eager operator computes
anything (the eager-work audit sees two casts and a lift) and the DSL writes every element; what the audit
counts is what crosses between tensors and Python: every input element out, every output element in."""

# expect: decorative_dsl
# problem: p36
import math

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
    w = weight.float().tolist()
    encoded = []
    for row in hidden_states.float().tolist():
        inv = 1.0 / math.sqrt(sum(v * v for v in row) / len(row) + 1e-6)
        encoded.extend(3.0 * v * inv * wj + 1.0 for v, wj in zip(row, w, strict=True))
    lifted = torch.tensor(encoded, dtype=torch.float32)
    decoded = torch.empty_like(lifted)
    _decode(lifted, decoded)
    return decoded.view(hidden_states.shape).to(hidden_states.dtype)
