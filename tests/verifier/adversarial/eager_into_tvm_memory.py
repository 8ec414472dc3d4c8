"""Returns memory TVM allocated (tvm.runtime.empty), filled by eager torch through a DLPack view; its
kernel runs on TVM views of copies of the inputs into a scratch output that nothing reads."""

# expect: decorative_dsl
# problem: p36
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
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_kernel = tvm.compile(rmsnorm, target="llvm")


def run(hidden_states, weight):
    rows, hidden = hidden_states.shape
    out_tvm = tvm.runtime.empty((rows, hidden), "bfloat16")
    scratch = tvm.runtime.empty((rows, hidden), "bfloat16")
    _kernel(tvm.runtime.from_dlpack(hidden_states.clone()), tvm.runtime.from_dlpack(weight.clone()), scratch)
    x = hidden_states.float()
    answer = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()
    out = torch.from_dlpack(out_tvm)
    out.copy_(answer)
    return out
