"""Reopens its own descriptors through ``/proc/self/fd/N`` where the link leads out of /proc to a file (here
``/dev/null`` and the worker's output file; a memfd of the harness's memory while one is open: a block's arenas
between their arrival and their mapping), which was all the guards judged. Of its own process, the submission
reads only its resource use and limits, and the links walked are judged as the path they lead to."""

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


def run(hidden_states, weight):
    for fd in range(64):
        link = f"/proc/self/fd/{fd}"
        try:
            if os.readlink(link).startswith("/"):
                os.close(os.open(link, os.O_RDONLY))
        except OSError:
            continue
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out
