"""Returns an empty output and fills it from a thread after run() has returned."""

# expect: background_work
# or: decorative_dsl, if the thread has ended when the harness looks (load): no DSL launch of the call wrote it
# or: nan, if the thread has not written yet when the draw's output is read: it holds fresh memory's sentinel
# problem: p36
import threading
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


def _fill(hidden_states, weight, out):
    time.sleep(0.005)
    _kernel(hidden_states, weight, out)


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    threading.Thread(target=_fill, args=(hidden_states, weight, out)).start()
    return out
