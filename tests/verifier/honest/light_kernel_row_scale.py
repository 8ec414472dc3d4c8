"""Honest partial plan: one light TIRx kernel computes each row's inverse RMS (64 values); eager
PyTorch applies it and the weight to produce the output from the kernel's result."""

# problem: p36
# plan: partial
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def inv_rms(x_ptr: T.handle, inv_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    for i in range(rows):
        inv[i] = T.float32(0)
        for j in range(128):
            inv[i] = inv[i] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        inv[i] = T.rsqrt(inv[i] / T.float32(128) + T.float32(1e-6))


_inv_rms = tvm.compile(inv_rms, target="llvm")


def run(hidden_states, weight):
    inv = torch.empty(hidden_states.shape[0], dtype=torch.float32)
    _inv_rms(hidden_states, inv)
    return (hidden_states.float() * inv[:, None] * weight.float()).to(hidden_states.dtype)
