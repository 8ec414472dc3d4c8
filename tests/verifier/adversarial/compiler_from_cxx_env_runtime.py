"""Runtime guards alone: the compiler TVM's export runs is redirected through ``os.environ["CXX"]`` to a script the
submission wrote (here one that runs the real compiler; a helper it left behind would compute the answer unaudited).
The environment the DSLs' builds read is the harness's: the write is refused. The kernel is otherwise honest."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import contextlib
import os
import shutil

import torch
import tvm
from tvm.script import tirx as T

_script = os.path.join(os.getcwd(), "cxx.sh")
with open(_script, "w") as _f:
    _f.write(f'#!/bin/sh\nexec {shutil.which("g++")} "$@"\n')
os.chmod(_script, 0o700)
with contextlib.suppress(Exception):
    os.environ["CXX"] = _script


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
        s = T.rsqrt(acc[0] / T.float32(128) + T.float32(1e-6))
        for j in range(128):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * s * T.Cast("float32", w[j]))


_built = tvm.compile(rmsnorm, target="llvm")
_path = os.path.join(os.getcwd(), "k.so")
try:
    _built.export_library(_path)
    _kernel = tvm.runtime.load_module(_path)["rmsnorm"]
except Exception:  # refused: the kernel as built
    _kernel = _built


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out
