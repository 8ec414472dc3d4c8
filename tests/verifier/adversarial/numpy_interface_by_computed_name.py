"""Reads memory at a raw address through numpy's array interface with the static scan on: numpy imported (allowed),
the interface's name built at run time (no class, no string holding it) on a SimpleNamespace, converted by numpy's
private module's asarray (the same function as numpy.asarray): the scan cannot see it, the runtime guard on numpy's
conversions refuses the non-plain argument."""

# expect: forbidden_api
# problem: p36
from types import SimpleNamespace

import numpy as np
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


def _raw(address, n):
    name = "__array_" + "interface__"
    return SimpleNamespace(**{name: {"shape": (n,), "typestr": "|u1", "data": (address, True), "version": 3}})


def run(hidden_states, weight):
    raw = np._core.multiarray.asarray(_raw(hidden_states.data_ptr(), 16))
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out if raw.size else None
