"""Reads the inputs into Python past the Tensor.tolist hook (the base class's own tolist, through super()),
computes the whole RMSNorm in plain Python, and puts the encoded answer into DSL memory whole with
tvm.runtime.tensor(list) for a TIRx kernel to decode: nothing crosses through torch. Data from Python into
tensors in bulk is refused to the submission (static scan off: it refuses that super() call already)."""

# expect: forbidden_api
# problem: p36
# static-scan: off
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


def _values(t):
    return super(torch.Tensor, t.float()).tolist()


def run(hidden_states, weight):
    w = _values(weight)
    encoded = []
    for row in _values(hidden_states):
        inv = 1.0 / math.sqrt(sum(v * v for v in row) / len(row) + 1e-6)
        encoded.extend(3.0 * v * inv * wj + 1.0 for v, wj in zip(row, w, strict=True))
    lifted = tvm.runtime.tensor(array.array("f", encoded))
    decoded = torch.empty(len(encoded), dtype=torch.float32)
    _decode(lifted, decoded)
    return decoded.view(hidden_states.shape).to(hidden_states.dtype)
