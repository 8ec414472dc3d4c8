"""A native library loaded from a file this worker did not export from a module it built: here a copy, under
another name, of TVM's own export of an honest kernel (the bytes could as well be a C kernel shipped in the
file, or a library a TIRx kernel wrote). Only a module TIRx built in this worker may run."""

# expect: forbidden_api
# problem: p36
import os
import shutil
import tempfile

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
        s = T.rsqrt(acc[0] / T.float32(128) + T.float32(1e-6))
        for j in range(128):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * s * T.Cast("float32", w[j]))


_folder = tempfile.mkdtemp()
_exported = os.path.join(_folder, "rmsnorm.so")
tvm.compile(rmsnorm, target="llvm").export_library(_exported)
_other = os.path.join(_folder, "prebuilt.so")
shutil.copyfile(_exported, _other)
_kernel = tvm.runtime.load_module(_other)["rmsnorm"]


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out
