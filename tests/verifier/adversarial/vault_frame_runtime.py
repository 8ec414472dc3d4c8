"""Walks from its own frame up to the harness's timer call and takes the timer's hook from its locals (harmless
to hold), then reads the hook's keyword defaults to reach the vault's generator and its frame."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import sys

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


def _timer_vault():
    frame = sys._getframe()
    while frame is not None:
        found = frame.f_locals.get("_timer")
        if found is not None:
            return found.__kwdefaults__["_send"].__self__
        frame = frame.f_back
    raise RuntimeError("no timer on the stack")


def run(hidden_states, weight):
    print(_timer_vault().gi_frame.f_locals)
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out
