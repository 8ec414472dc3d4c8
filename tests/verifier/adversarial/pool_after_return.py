"""Hands its work to a thread pool made at import and returns before the pool has finished: the pool's
thread existed before the call, and it is still working when run() returns (the idle pool of an honest
submission is no background work, this one is)."""

# expect: background_work
# or: nan, a launch of the pool's that comes after run() returned does not run (outside the call's timed window): the
# pool thread may have ended by then, its output left unwritten
# problem: p36
from concurrent.futures import ThreadPoolExecutor

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
_POOL = ThreadPoolExecutor(max_workers=1)


def _fill(hidden_states, weight, out):
    for _ in range(200):  # the answer, many times over: still at it when the harness looks
        _kernel(hidden_states, weight, out)


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _POOL.submit(_fill, hidden_states, weight, out)
    return out
