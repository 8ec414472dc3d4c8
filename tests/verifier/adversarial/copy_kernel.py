"""Torch computes the answer; the DSL kernel only copies it into the output."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def copy_rows(src_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    src = T.match_buffer(src_ptr, (rows, 128), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    for i, j in T.grid(rows, 128):
        out[i, j] = src[i, j]


_copy = tvm.compile(copy_rows, target="llvm")


def _eager(x, w):
    inv = torch.rsqrt(x.float().pow(2).mean(dim=-1, keepdim=True) + 1e-6)
    return (x.float() * inv * w.float()).to(x.dtype)


def run(hidden_states, weight):
    answer = _eager(hidden_states, weight)
    out = torch.empty_like(hidden_states)
    _copy(answer, out)
    return out
