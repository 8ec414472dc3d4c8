"""Reads memory at a raw address through an array's .ctypes (numpy imported, as allowed; the static scan sees no
ctypes name on an attribute of a call): the view's class rebuilt over the input's address, its pointer cast by
numpy's own data_as, which works with ctypes, so the guards' ctypes events take the cast for the library's. The
runtime guard refuses the .ctypes view to the submission."""

# expect: forbidden_api
# problem: p36
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
    ffi = np.zeros(1).ctypes._ctypes  # attributes of a call's result: no name the scan resolves
    view = type(np.zeros(1).ctypes)(np.zeros(1, dtype=np.uint8), hidden_states.data_ptr())
    pointer = view.data_as(ffi.POINTER(ffi.c_uint8))
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out if pointer[0] >= 0 else None
