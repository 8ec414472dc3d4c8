"""Opens the root directory as a descriptor, then its process table's status file relative to it: the open event
carries no descriptor, and the relative path judged against the working directory looked like a file of the
temporary directory. Directories outside the temporary directory are not opened as descriptors by the submission."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import os

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
_root = os.open("/", os.O_RDONLY)
_status = os.read(os.open("proc/1/status", os.O_RDONLY, dir_fd=_root), 4096)


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out
