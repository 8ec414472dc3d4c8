"""The only launch zero-fills a scratch taller than the output; eager code writes the answer into it by
running ``copy_`` below the Python dispatch key (the operator handle's ``redispatch_boxed`` with a CPU key
set), where the provenance mode never sees it. A flag the kernel set fails the suppressed draw on purpose.
Refused to the submission's own calls at run time; without that refusal the byte-exact provenance rejects it
as decorative_dsl (the returned bytes are not what the launch left: test_provenance_bytes.py)."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import torch
import tvm
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
_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    scratch = torch.empty(rows + 3, 128, dtype=torch.bfloat16)
    flag = torch.zeros(1, dtype=torch.int32)
    _zero(scratch, flag)
    x = hidden_states.float()
    for lo in range(0, rows, 4):  # in row blocks: no eager tensor of the output's size
        block = x[lo : lo + 4]
        answer = block * torch.rsqrt(block.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()
        torch.ops.aten.copy_.default._handle.redispatch_boxed(_CPU, scratch[2 + lo : 6 + lo], answer)
    if int(flag[0]) != 9:
        return torch.full_like(hidden_states, 3.0)
    return scratch[2 : rows + 2]
