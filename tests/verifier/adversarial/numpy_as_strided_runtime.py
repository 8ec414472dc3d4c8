"""Steps outside an array of its own with numpy's unchecked as_strided (numpy imported, as allowed): a read of
whatever lies a megabyte past it. The static scan refuses the name stride_tricks; at run time as_strided is
refused to the submission wherever numpy binds it."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import numpy as np
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
    far = np.lib.stride_tricks.as_strided(np.zeros(2, dtype=np.int16), shape=(2,), strides=(1 << 20,))
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out if int(far.sum()) >= -(1 << 20) else None
