"""Allocates until memory runs out. The worker's bound is its address space (``RLIMIT_AS``), which an allocation
reaches whether or not its pages are touched: the chunks are left untouched, so the case takes the same time
everywhere. Touched (``torch.ones``), 2 GiB took 1 s on a quiet VM and 20 s where the host backed the guest's memory
lazily (pages past the ~2.5 GB the guest had used cost 2.4-2.9 s a 256 MiB chunk: a plain process measured the same),
and the case failed as a timeout."""

# expect: memory
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
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    hoard = []
    while True:
        hoard.append(torch.empty(1 << 28, dtype=torch.uint8))
