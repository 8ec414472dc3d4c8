"""Starts its background thread through _thread.start_new, an old alias of start_new_thread, and
leaves it running after run() returns: for a second, so that it is still running whenever the draw is judged (at
50 ms a loaded machine's draw sometimes ended after it, and the draw's count of thread starts spoke first)."""

# expect: background_work
# problem: p36
# static-scan: off
import _thread
import time

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


def _spin():
    end = time.perf_counter() + 1.0
    while time.perf_counter() < end:
        pass


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    _thread.start_new(_spin, ())
    return out
