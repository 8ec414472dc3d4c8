"""As decode_fit_run_out_of_stack, but run() lowers the interpreter's recursion limit to just above its own depth
(named through the module at run time) and launches from where it stands: the harness's checks run deeper."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import sys

import torch
import tvm
from tvm.script import tirx as T

MARGIN = 15


@T.prim_func
def decode(y_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    y = T.match_buffer(y_ptr, (rows, 128), "float32")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    for i, j in T.grid(rows, 128):
        out[i, j] = T.Cast("bfloat16", (y[i, j] - T.float32(1.0)) * T.float32(0.25))


_kernel = tvm.compile(decode, target="llvm")


def _headroom(depth=0):
    try:
        return _headroom(depth + 1)
    except RecursionError:
        return depth


def _deep(frames, encoded, out):
    if frames > 0:
        return _deep(frames - 1, encoded, out)
    _kernel(encoded, out)
    return out


def run(hidden_states, weight):
    x = hidden_states.float()
    answer = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * weight.float()
    encoded = answer * 4.0 + 1.0
    out = torch.empty_like(hidden_states)
    limit = getattr(sys, "setrecursion" + "limit")
    limit(sys.getrecursionlimit() - _headroom() + MARGIN)
    return _deep(0, encoded, out)
