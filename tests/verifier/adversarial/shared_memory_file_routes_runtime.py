"""Runtime guards alone: torch's routes from a tensor to memory another process maps (a /dev/shm file, a
descriptor, a file mapped as a tensor), through which a helper process would compute the answer. No kernel plan needs
them: each is refused (and recorded, though the submission catches it). The kernel is otherwise honest."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import contextlib
import os

import torch
import tvm
from tvm.script import tirx as T

_buffer = torch.zeros(1024, dtype=torch.uint8)
with contextlib.suppress(Exception):
    _buffer.untyped_storage()._share_filename_cpu_()
with contextlib.suppress(Exception):
    _buffer.untyped_storage()._share_fd_cpu_()
with contextlib.suppress(Exception):
    _buffer.share_memory_()
_file = os.path.join(os.getcwd(), "mapped")
with open(_file, "wb") as _f:
    _f.write(bytes(1024))
with contextlib.suppress(Exception):
    torch.from_file(_file, shared=True, size=1024, dtype=torch.uint8)


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
