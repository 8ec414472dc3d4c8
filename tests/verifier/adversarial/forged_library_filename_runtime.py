"""Runs dynamic code from a function whose code object was re-labelled with a library's file name
(``code.replace(co_filename=...)``): a guard that trusted the name would take it for torch's own code
(static scan off: the runtime guards must catch it)."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import types

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


def _define(source, namespace):
    exec(source, namespace)


_as_torch = types.FunctionType(_define.__code__.replace(co_filename=torch.__file__), {"exec": exec})
_namespace = {"torch": torch, "_kernel": _kernel}
_as_torch(
    "def run(hidden_states, weight):\n"
    "    out = torch.empty_like(hidden_states)\n"
    "    _kernel(hidden_states, weight, out)\n"
    "    return out\n",
    _namespace,
)
run = _namespace["run"]
