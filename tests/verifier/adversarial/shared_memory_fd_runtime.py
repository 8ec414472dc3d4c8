"""Looks for a descriptor of the verifier's shared memory (the control page, where launches, suppression and call times
live, or an arena) among its own open files: mmap keeps a duplicate of every descriptor it maps. Were one open, this
submission would forge through it; it returns a wrong answer when it finds none, so a verdict other than wrong_output
means the page was reachable."""

# expect: wrong_output
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


def _shared_memory_open() -> bool:
    for fd in range(1024):  # by number: listing /proc/self/fd is refused (verifier README, step 2)
        try:
            if "memfd:mkbsim" in os.readlink(f"/proc/self/fd/{fd}"):
                return True
        except OSError:
            continue
    return False


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out if _shared_memory_open() else out.zero_()
