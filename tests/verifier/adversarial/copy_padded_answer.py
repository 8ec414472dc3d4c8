"""The whole answer computed eagerly on a padded copy of the inputs (3 more rows, 5 more columns, at an
offset: no eager tensor has the output's size); the only DSL kernel gathers it into the output."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def gather(src_ptr: T.handle, index_ptr: T.handle, out_ptr: T.handle):
    n = T.int32()
    rows = T.int32()
    src = T.match_buffer(src_ptr, (n,), "float32")
    index = T.match_buffer(index_ptr, (rows, 128), "int32")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    for i, j in T.grid(rows, 128):
        out[i, j] = T.Cast("bfloat16", src[index[i, j]])


_gather = tvm.compile(gather, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    i = torch.arange(rows, dtype=torch.int32)[:, None]
    j = torch.arange(128, dtype=torch.int32)[None, :]
    xp = torch.zeros(rows + 3, 133)
    xp[2 : rows + 2, 4:132] = hidden_states.float()
    wp = torch.zeros(133)
    wp[4:132] = weight.float()
    src = xp * torch.rsqrt(xp.pow(2).sum(dim=-1, keepdim=True) / 128 + 1e-6) * wp
    index = (i + 2) * 133 + (j + 4)
    out = torch.empty_like(hidden_states)
    _gather(src.reshape(-1), index.contiguous(), out)
    return out
