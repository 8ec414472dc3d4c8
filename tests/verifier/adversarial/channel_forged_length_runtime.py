"""Writes a message length of 1 MiB and four bytes on the worker's channel before returning: the verifier reads the
harness's answer as the rest of that message and waits for the remainder until the call's time limit (then
``harness_tamper``, 60 s late in production). Refused at the write."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import os
import stat
import struct

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


def _channel() -> int:
    for fd in range(3, 64):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                return fd
        except OSError:
            continue
    return -1


def run(hidden_states, weight):
    os.write(_channel(), struct.pack("!Q", 1 << 20) + b"junk")
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out
