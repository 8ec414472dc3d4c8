"""The DSL computes row 0 and its index; eager code computes every row four at a time into the output (each made
to depend on a DSL seed, NaN under suppression), then stores the DSL's row at the DSL's index
(``out[idx] = row``, an indexed store). Passed while derived credit was judged per operator: the store's
destination was no operand, its operands were all the DSL's, so the whole output became the DSL's; now only
the elements stored are (DESIGN §5, "derived credit")."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def first_row(x_ptr: T.handle, w_ptr: T.handle, row_ptr: T.handle, idx_ptr: T.handle, s_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    w = T.match_buffer(w_ptr, (128,), "bfloat16")
    row = T.match_buffer(row_ptr, (1, 128), "bfloat16")
    idx = T.match_buffer(idx_ptr, (1,), "int64")
    s = T.match_buffer(s_ptr, (1,), "float32")
    acc = T.alloc_buffer((1,), "float32")
    acc[0] = T.float32(0)
    for j in range(128):
        acc[0] = acc[0] + T.Cast("float32", x[0, j]) * T.Cast("float32", x[0, j])
    inv = T.rsqrt(acc[0] / T.float32(128) + T.float32(1e-6))
    for j in range(128):
        row[0, j] = T.Cast("bfloat16", T.Cast("float32", x[0, j]) * inv * T.Cast("float32", w[j]))
    idx[0] = T.int64(0)
    s[0] = T.Cast("float32", x[0, 0]) * T.float32(0)


_first_row = tvm.compile(first_row, target="llvm")


def run(hidden_states, weight):
    row = torch.empty(1, 128, dtype=torch.bfloat16)
    idx = torch.empty(1, dtype=torch.int64)
    s = torch.empty(1, dtype=torch.float32)
    _first_row(hidden_states, weight, row, idx, s)
    out = torch.empty_like(hidden_states)
    for block, rows in zip(hidden_states.float().split(4), out.split(4), strict=True):
        answer = block * torch.rsqrt(block.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()
        torch.add(answer, s, out=rows)
    out[idx] = row
    return out
