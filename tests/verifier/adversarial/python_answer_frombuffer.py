"""Computes the whole RMSNorm in plain Python and turns the encoded answer into a tensor whole, with
torch.frombuffer over an array.array (no element crosses one by one), for a TIRx kernel to decode. Tensors made
from Python buffers are refused to the submission."""

# expect: forbidden_api
# problem: p36
import array
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
    encoded = array.array("f")
    for row in hidden_states.float().tolist():
        inv = 1.0 / math.sqrt(sum(v * v for v in row) / len(row) + 1e-6)
        encoded.extend(3.0 * v * inv * wj + 1.0 for v, wj in zip(row, w, strict=True))
    lifted = torch.frombuffer(encoded, dtype=torch.float32)
    decoded = torch.empty_like(lifted)
    _decode(lifted, decoded)
    return decoded.view(hidden_states.shape).to(hidden_states.dtype)
