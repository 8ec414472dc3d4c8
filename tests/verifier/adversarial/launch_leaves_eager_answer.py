"""The answer is written eagerly into rows 1.. of a scratch BEFORE the only launch, which then writes a
marker into row 0 and a flag: the launch's argument spans the answer but never changes it. With launches
suppressed the flag stays unset and run() returns garbage, so only provenance can reject it. Passed before
the byte-exact provenance (DESIGN §5): the range from the first to the last changed byte counted as the
DSL's, and eager data strictly inside a DSL-written range stayed "DSL-derived"."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def mark(s_ptr: T.handle, f_ptr: T.handle):
    rows = T.int32()
    s = T.match_buffer(s_ptr, (rows, 128), "bfloat16")
    f = T.match_buffer(f_ptr, (1,), "int32")
    for j in range(128):
        s[0, j] = T.Cast("bfloat16", T.float32(j))
    s[rows - 1, 127] = s[rows - 1, 127]
    f[0] = 7


_mark = tvm.compile(mark, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    scratch = torch.empty(rows + 1, 128, dtype=torch.bfloat16)
    x = hidden_states.float()
    for lo in range(0, rows, 4):  # in row blocks: no eager tensor of the output's size
        hi = min(rows, lo + 4)
        block = x[lo:hi]
        inv = torch.rsqrt(block.pow(2).mean(-1, keepdim=True) + 1e-6)
        torch.mul(block * inv, weight.float(), out=scratch[1 + lo : 1 + hi])  # cast on store
    flag = torch.zeros(1, dtype=torch.int32)
    _mark(scratch, flag)
    if int(flag[0]) != 7:
        return torch.full_like(hidden_states, 3.0)
    return scratch[1:]
