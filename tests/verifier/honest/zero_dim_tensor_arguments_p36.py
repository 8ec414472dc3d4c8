"""Honest full plan whose RMSNorm kernel takes its epsilon and its row count as 0-d tensors (float64, int64, made once
at import) and a 0-d float32 scale of 1.0: a 0-d tensor of more than two bytes a element crashed the verification
once (the copy checks read every argument as 2- and 4-byte patterns, and torch takes no dtype view of a 0-d tensor;
red team rt48)."""

# problem: p36
import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128
_EPS = torch.tensor(1e-6, dtype=torch.float64)
_ONE = torch.tensor(1.0, dtype=torch.float32)


@T.prim_func
def norm(x_ptr: T.handle, w_ptr: T.handle, o_ptr: T.handle, eps_ptr: T.handle, rows_ptr: T.handle, one_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    o = T.match_buffer(o_ptr, (rows, HIDDEN), "bfloat16")
    eps = T.match_buffer(eps_ptr, (), "float64")
    count = T.match_buffer(rows_ptr, (), "int64")
    one = T.match_buffer(one_ptr, (), "float32")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(T.Cast("int32", count[()])):
        acc[0] = T.float32(0)
        for k in range(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, k]) * T.Cast("float32", x[i, k])
        scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.Cast("float32", eps[()])) * one[()]
        for j in range(HIDDEN):
            o[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_norm = tvm.compile(norm, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(hidden_states)
    rows = torch.tensor(hidden_states.shape[0], dtype=torch.int64)
    _norm(hidden_states, weight, out, _EPS, rows, _ONE)
    return out
