"""The answer is computed eagerly in row blocks (no eager tensor of the output's size), transposed into a
pool allocated at import (memory no operator "made" during the call), and handed to the kernel as its int16
bit pattern; the kernel only transposes the bits back into the output. No flag: with launches suppressed
the output keeps its sentinel. Passed before the copy check held launch arguments of every dtype by bit
pattern, from any memory (DESIGN §5)."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

_POOL = torch.zeros(1 << 16, dtype=torch.bfloat16)


@T.prim_func
def untranspose(p_ptr: T.handle, y_ptr: T.handle):
    rows = T.int32()
    p = T.match_buffer(p_ptr, (128, rows), "int16")
    y = T.match_buffer(y_ptr, (rows, 128), "bfloat16")
    for i, j in T.grid(rows, 128):
        y[i, j] = T.reinterpret("bfloat16", p[j, i])


_untranspose = tvm.compile(untranspose, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    pool = _POOL[: rows * 128].view(128, rows)
    x = hidden_states.float()
    for lo in range(0, rows, 4):
        block = x[lo : lo + 4]
        answer = block * torch.rsqrt(block.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()
        pool[:, lo : lo + 4].copy_(answer.t())
    out = torch.empty_like(hidden_states)
    _untranspose(pool.view(torch.int16), out)
    return out
