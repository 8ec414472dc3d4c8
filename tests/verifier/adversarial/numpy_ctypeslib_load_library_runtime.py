"""Loads a native library through numpy.ctypeslib.load_library (numpy imported, as allowed): the dlopen runs in
numpy's ctypeslib, which works with ctypes, so the guards' ctypes events take it for the library's; a library of the
submission's own would run its constructors there. The static scan refuses the name ctypeslib; at run time
load_library is refused to the submission."""

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
    libm = np.ctypeslib.load_library("libm.so.6", "/lib/x86_64-linux-gnu/")
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out if libm is not None else None
