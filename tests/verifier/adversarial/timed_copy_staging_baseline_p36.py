"""rt14 F2: the draws' own DSL->DSL staging copy raised the copy check's baseline. Draws: the norm kernel writes a
workspace, a copy kernel copies it into the output (the draws' copy of a launch-made workspace). Timed calls: eager
code writes the answer into the workspace, the norm kernel runs on no rows, the copy kernel copies it out (and fills a
pad, for the bytes the draws' norm kernel changed). A launch's copy of what an earlier launch of the call made is no
copy; of what eager code made, it is."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128
PAD = 200000  # busy iterations: the timed launches' DSL time above the rule's share of the draws'


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
def copy(s_ptr: T.handle, o_ptr: T.handle, pad_ptr: T.handle, fill: T.float32, reps: T.int32):
    rows = T.int32()
    s = T.match_buffer(s_ptr, (rows, HIDDEN), "bfloat16")
    o = T.match_buffer(o_ptr, (rows, HIDDEN), "bfloat16")
    pad = T.match_buffer(pad_ptr, (rows, HIDDEN), "float32")
    acc = T.alloc_buffer((1,), "float32")
    for i, j in T.grid(rows, HIDDEN):
        o[i, j] = s[i, j]
    if fill != T.float32(0):
        for i, j in T.grid(rows, HIDDEN):
            pad[i, j] = fill * T.Cast("float32", i * HIDDEN + j + 1)
    acc[0] = T.float32(1)
    for r in range(reps):
        acc[0] = acc[0] * T.float32(1.0000001) + T.Cast("float32", s[r % rows, r % HIDDEN]) * T.float32(1e-30)
    if acc[0] == T.float32(-12345.0):
        o[0, 0] = T.Cast("bfloat16", acc[0])


_norm = tvm.compile(norm, target="llvm")
_copy = tvm.compile(copy, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    staged = torch.empty_like(hidden_states)
    out = torch.empty_like(hidden_states)
    pad = torch.empty(hidden_states.shape, dtype=torch.float32)
    if bool(torch.empty(8, dtype=torch.int32).eq(0).all()):  # a correctness draw: fresh memory holds the sentinel
        _norm(hidden_states, weight, staged, rows)
        _copy(staged, out, pad, 0.0, 0)
        return out
    x = hidden_states.float()
    staged.copy_(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float())
    _norm(hidden_states, weight, staged, 0)
    _copy(staged, out, pad, 1.0 + float(torch.rand(1)), PAD)
    return out
