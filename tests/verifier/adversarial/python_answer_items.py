"""Reads every input element into Python with float() (one item() each, no tolist(); bytes(storage), a
storage's elements and struct/array over them cross the same way), computes the whole RMSNorm in plain Python,
encodes it as 3y + 1 and lifts it into a tensor for a TIRx kernel to decode. Counted as it crosses: every input
element read out, every output element lifted in."""

# expect: decorative_dsl
# problem: p36
# thorough: ~15 s on two cores: every input element read into Python by item() on every call
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
    cols = hidden_states.shape[1]
    x = [float(v) for v in hidden_states.float().reshape(-1)]
    w = [float(v) for v in weight.float()]
    encoded = []
    for start in range(0, len(x), cols):
        row = x[start : start + cols]
        inv = 1.0 / math.sqrt(sum(v * v for v in row) / cols + 1e-6)
        encoded.extend(3.0 * v * inv * wj + 1.0 for v, wj in zip(row, w, strict=True))
    lifted = torch.tensor(encoded, dtype=torch.float32)
    decoded = torch.empty_like(lifted)
    _decode(lifted, decoded)
    return decoded.view(hidden_states.shape).to(hidden_states.dtype)
