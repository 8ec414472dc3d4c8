"""A TIRx kernel zero-fills a scratch and sets a flag; the eager answer is written into the scratch with
the provenance mode popped through ``_pop_mode_temporarily`` (a module-level alias of the stack's pop, bound
before the guards replaced ``torch._C._pop_torch_dispatch_stack``). Refused to the submission's own calls at
run time; without that refusal the byte-exact provenance rejects it as decorative_dsl (the returned bytes are
not what the launch left)."""

# expect: forbidden_api
# problem: p36
# static-scan: off
from contextlib import nullcontext

import torch
import tvm
from torch.utils import _python_dispatch
from tvm.script import tirx as T


@T.prim_func
def zero(s_ptr: T.handle, f_ptr: T.handle):
    rows = T.int32()
    s = T.match_buffer(s_ptr, (rows, 128), "bfloat16")
    f = T.match_buffer(f_ptr, (1,), "int32")
    for i, j in T.grid(rows, 128):
        s[i, j] = T.Cast("bfloat16", T.float32(0))
    f[0] = 9


_zero = tvm.compile(zero, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    scratch = torch.empty(rows + 3, 128, dtype=torch.bfloat16)
    flag = torch.zeros(1, dtype=torch.int32)
    _zero(scratch, flag)
    # a mode is on the stack on correctness draws only
    unseen = _python_dispatch._pop_mode_temporarily() if _python_dispatch._len_torch_dispatch_stack() else nullcontext()
    with unseen:
        x = hidden_states.float()
        for lo in range(0, rows, 4):  # in row blocks: no eager tensor of the output's size
            block = x[lo : lo + 4]
            scratch[1 + lo : 5 + lo] = block * torch.rsqrt(block.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()
    if int(flag[0]) != 9:
        return torch.full_like(hidden_states, 3.0)
    return scratch[1 : rows + 1]
