"""RMSNorm in one TIRx kernel that writes half the answer; eager code doubles the output in place (``out.mul_(2)``),
as an agent's glue converting a kernel's result (a base-e lse to base 2, red team rt46 F3 on p16) does. The vault
read the operand's lineage after the operator had changed its bytes, so the doubled output was eager-made (the copy
check: 100% existed outside the DSL) and the plan decorative, while ``out = out * 2`` passed; now an in-place
operator's first argument is read as it was before it ran (``_provenance.read_in_place``). A partial plan: the
doubling is a quarter of the reference's element work."""

# problem: p36
# plan: partial
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    w = T.match_buffer(w_ptr, (128,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        for j in range(128):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        scale = T.rsqrt(acc[0] / T.float32(128) + T.float32(1e-6))
        for j in range(128):
            half = T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]) * T.float32(0.5)
            out[i, j] = T.Cast("bfloat16", half)


_kernel = tvm.compile(rmsnorm, target="llvm")


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    out.mul_(2)
    return out
