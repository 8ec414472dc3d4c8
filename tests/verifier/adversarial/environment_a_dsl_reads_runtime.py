"""Runtime guards alone: a variable a DSL's build reads (TVM's CUDA compile mode, which on cuda runs ``nvcc`` from
PATH inside ``tvm.compile``), set through ``os.putenv`` and ``os.environ``. The environment is the harness's: both
writes are refused (and recorded, though the submission catches them). The kernel is otherwise honest."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import contextlib
import os

import torch
import tvm
from tvm.script import tirx as T

with contextlib.suppress(Exception):
    os.putenv("TVM_CUDA_COMPILE_MODE", "nvcc")
with contextlib.suppress(Exception):
    os.environ.setdefault("TVM_CUDA_COMPILE_MODE", "nvcc")


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


_built = tvm.compile(rmsnorm, target="llvm")
_kernel = _built


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out
