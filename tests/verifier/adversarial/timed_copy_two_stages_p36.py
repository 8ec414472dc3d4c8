"""rt14 F2 laundered through two workspaces: draws stage the norm kernel's result through two DSL copies (workspace
one, workspace two, the output); timed calls put an eager answer in workspace one, and the same two copies carry it
out. A copy of a launch's copy is a copy: the second launch copies what the first copied, not what it made."""

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
def copy(s_ptr: T.handle, o_ptr: T.handle, reps: T.int32):
    rows = T.int32()
    s = T.match_buffer(s_ptr, (rows, HIDDEN), "bfloat16")
    o = T.match_buffer(o_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i, j in T.grid(rows, HIDDEN):
        o[i, j] = s[i, j]
    acc[0] = T.float32(1)
    for r in range(reps):
        acc[0] = acc[0] * T.float32(1.0000001) + T.Cast("float32", s[r % rows, r % HIDDEN]) * T.float32(1e-30)
    if acc[0] == T.float32(-12345.0):
        o[0, 0] = T.Cast("bfloat16", acc[0])


_norm = tvm.compile(norm, target="llvm")
_copy = tvm.compile(copy, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    first = torch.empty_like(hidden_states)
    second = torch.empty_like(hidden_states)
    out = torch.empty_like(hidden_states)
    if bool(torch.empty(8, dtype=torch.int32).eq(0).all()):  # a correctness draw: fresh memory holds the sentinel
        _norm(hidden_states, weight, first, rows)
        _copy(first, second, 0)
        _copy(second, out, 0)
        return out
    x = hidden_states.float()
    first.copy_(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float())
    _norm(hidden_states, weight, first, 0)
    _copy(first, second, PAD // 2)
    _copy(second, out, PAD // 2)
    return out
