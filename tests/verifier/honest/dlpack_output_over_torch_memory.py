"""Honest: the kernel writes its output through a TVM tensor over torch memory (``tvm.runtime.from_dlpack`` of a
``torch.empty_like`` result), and run() returns the torch tensor: what the launch changed through the TVM view is
recorded over the torch storage's bytes (README, "Memory no recorded writer left")."""

# problem: p36
import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        for j in range(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(1e-6))
        for j in range(HIDDEN):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_kernel = tvm.compile(rmsnorm, target="llvm")


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, tvm.runtime.from_dlpack(out))
    return out
