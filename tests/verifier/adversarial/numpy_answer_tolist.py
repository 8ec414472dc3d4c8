"""Computes the whole RMSNorm in numpy (imported, as honest helpers may) on the inputs' tolist(), encodes it as
3y + 1, hands it back with torch.from_numpy, and has a TIRx kernel decode it into the output. numpy's arithmetic is
no eager operator; what the audit counts is what crosses between tensors and Python as for plain Python: every
input element out (tolist), every output element in (from_numpy lifts the array)."""

# expect: decorative_dsl
# problem: p36
import numpy as np
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
    x = np.array(hidden_states.float().tolist(), dtype=np.float32)
    w = np.array(weight.float().tolist(), dtype=np.float32)
    answer = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + np.float32(1e-6)) * w
    lifted = torch.from_numpy(np.ascontiguousarray(3.0 * answer + 1.0, dtype=np.float32).reshape(-1))
    decoded = torch.empty_like(lifted)
    _decode(lifted, decoded)
    return decoded.view(hidden_states.shape).to(hidden_states.dtype)
