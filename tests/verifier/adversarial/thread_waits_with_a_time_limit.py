"""Returns an empty output and fills it from a thread run() started, which first waits on an event with a time
limit (nobody sets it): a thread blocked where only the clock wakes it is not idle, unlike a pool's thread on its
queue, and the verifier must not take it for one."""

# expect: background_work
# or: nan, the thread's launch after run() returned does not run (outside the call's timed window): the output stays
# unwritten if the harness reads it before it looks at the threads
# problem: p36
import threading

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
    threading.Event().wait(0.02)
    _kernel(hidden_states, weight, out)


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    threading.Thread(target=_fill, args=(hidden_states, weight, out)).start()
    return out
