"""The whole answer computed eagerly on the inputs' rows in a shuffled order; the only DSL kernel gathers
them back into place."""

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
    j = torch.arange(128, dtype=torch.int32)[None, :]
    order = torch.randperm(rows, generator=torch.Generator().manual_seed(rows))
    xg = hidden_states[order].float()
    src = xg * torch.rsqrt(xg.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * weight.float()
    index = torch.argsort(order).to(torch.int32)[:, None] * 128 + j
    out = torch.empty_like(hidden_states)
    _gather(src.reshape(-1), index.contiguous(), out)
    return out
