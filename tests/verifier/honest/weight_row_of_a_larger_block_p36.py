"""Honest p36 (RMSNorm): one TIRx kernel does the whole norm; the only eager glue is the weight upcast to float32 and
handed over as a [1, 128] row of a repeated block (``weight.float().repeat(8, 1)[2:3]``: contiguous to torch, its
size-1 dimension strided 128). Red team rt29 F2: the vault viewed the row's transpose ([128, 1], innermost stride
128) as 16-bit patterns to compare it with the bfloat16 output, and torch refuses a dtype view whose innermost
stride is not 1 even over one element: the verification crashed. The same bytes are viewed with the stride torch
asks now."""

# problem: p36
# plan: full
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (1, HIDDEN), "float32")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        for j in range(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        for j in range(HIDDEN):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j])
                               * (T.float32(1) / T.sqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))) * w[0, j])


_k = tvm.compile(rmsnorm, target="llvm")


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _k(hidden_states.contiguous(), weight.float().repeat(8, 1)[2:3].contiguous(), out)
    return out
