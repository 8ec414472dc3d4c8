"""Honest full plan with a staging copy: the norm kernel writes a workspace, a copy kernel copies it into the output,
on every call. A launch's copy of what an earlier launch of the same call made is no copy (the evidence copy check:
the draws' copied share and the timed calls' are both ~0)."""

# problem: p36
import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128


@T.prim_func
def norm(x_ptr: T.handle, w_ptr: T.handle, s_ptr: T.handle, n: T.int32):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    s = T.match_buffer(s_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(n):
        acc[0] = T.float32(0)
        for k in range(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, k]) * T.Cast("float32", x[i, k])
        for j in range(HIDDEN):
            s[i, j] = T.Cast(
                "bfloat16",
                T.Cast("float32", x[i, j])
                * T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(1e-6))
                * T.Cast("float32", w[j]),
            )


@T.prim_func
def copy(s_ptr: T.handle, o_ptr: T.handle):
    rows = T.int32()
    s = T.match_buffer(s_ptr, (rows, HIDDEN), "bfloat16")
    o = T.match_buffer(o_ptr, (rows, HIDDEN), "bfloat16")
    for i, j in T.grid(rows, HIDDEN):
        o[i, j] = s[i, j]


_norm = tvm.compile(norm, target="llvm")
_copy = tvm.compile(copy, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    staged = torch.empty_like(hidden_states)
    out = torch.empty_like(hidden_states)
    _norm(hidden_states, weight, staged, rows)
    _copy(staged, out)
    return out
