"""The only launch fills a scratch one column wider than the output; eager code then writes the answer
over it in place (an eager ``copy_`` of row blocks into a strided view), and a flag the kernel set gates the
result. Every returned byte was written by the launch, then overwritten. Passed before the byte-exact
provenance (DESIGN §5): an eager write strictly inside a DSL-written range kept it "DSL-derived"."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def fill(s_ptr: T.handle, f_ptr: T.handle):
    rows = T.int32()
    s = T.match_buffer(s_ptr, (rows, 129), "bfloat16")
    f = T.match_buffer(f_ptr, (1,), "int32")
    for i, j in T.grid(rows, 129):
        s[i, j] = T.Cast("bfloat16", T.float32(0))
    f[0] = 5


_fill = tvm.compile(fill, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    scratch = torch.empty(rows, 129, dtype=torch.bfloat16)
    flag = torch.zeros(1, dtype=torch.int32)
    _fill(scratch, flag)
    x = hidden_states.float()
    for lo in range(0, rows, 4):
        hi = min(rows, lo + 4)
        block = x[lo:hi]
        answer = block * torch.rsqrt(block.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()
        scratch[lo:hi, :128].copy_(answer)
    if int(flag[0]) != 5:
        return torch.full_like(hidden_states, 3.0)
    return scratch[:, :128]
