"""rt14 F3 through a transposed view: the kernels write a (hidden, rows + 1) buffer, the output is its first rows
columns, transposed (no argument of the output's element count or layout). Draws: the norm kernel writes it. Timed
calls: eager code computes the answer, the norm kernel runs on no rows, a copy kernel transposes the answer into the
buffer. The copy check judges the output's memory through its strides."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128
PAD = 200000  # busy iterations: the timed launches' DSL time above the rule's share of the draws'
SPARE = 1  # rows of the buffer beyond the output's


@T.prim_func
def norm(x_ptr: T.handle, w_ptr: T.handle, o_ptr: T.handle, n: T.int32):
    rows = T.int32()
    cap = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    o = T.match_buffer(o_ptr, (HIDDEN, cap), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(n):
        acc[0] = T.float32(0)
        for k in range(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, k]) * T.Cast("float32", x[i, k])
        for j in range(HIDDEN):
            o[j, i] = T.Cast(
                "bfloat16",
                T.Cast("float32", x[i, j])
                * T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(1e-6))
                * T.Cast("float32", w[j]),
            )


@T.prim_func
def copy(s_ptr: T.handle, o_ptr: T.handle, n: T.int32, reps: T.int32):
    rows = T.int32()
    cap = T.int32()
    s = T.match_buffer(s_ptr, (rows, HIDDEN), "bfloat16")
    o = T.match_buffer(o_ptr, (HIDDEN, cap), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i, j in T.grid(n, HIDDEN):
        o[j, i] = s[i, j]
    acc[0] = T.float32(1)
    for r in range(reps):
        acc[0] = acc[0] * T.float32(1.0000001) + T.Cast("float32", s[r % rows, r % HIDDEN]) * T.float32(1e-30)
    if acc[0] == T.float32(-12345.0):
        o[0, 0] = T.Cast("bfloat16", acc[0])


_norm = tvm.compile(norm, target="llvm")
_copy = tvm.compile(copy, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    answer = torch.empty_like(hidden_states)
    buffer = torch.empty((HIDDEN, rows + SPARE), dtype=hidden_states.dtype)
    if bool(torch.empty(8, dtype=torch.int32).eq(0).all()):  # a correctness draw: fresh memory holds the sentinel
        _norm(hidden_states, weight, buffer, rows)
        _copy(answer, buffer, 0, 0)
        return buffer[:, :rows].t()
    x = hidden_states.float()
    answer.copy_(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float())
    _norm(hidden_states, weight, buffer, 0)
    _copy(answer, buffer, rows, PAD)
    return buffer[:, :rows].t()
