"""The whole answer computed eagerly on the transposed inputs (the output's size, other positions); the
only DSL kernel transposes it back."""

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
    xt = hidden_states.t().contiguous().float()
    src = xt * torch.rsqrt(xt.pow(2).mean(dim=0, keepdim=True) + 1e-6) * weight.float()[:, None]
    index = j * rows + i
    out = torch.empty_like(hidden_states)
    _gather(src.reshape(-1), index.contiguous(), out)
    return out
