"""A thread pool warmed at import (its thread idle on its queue) gets one task from run(): the input's rows, each a
view (``unbind``: no value crosses). The pool's thread reads every row as the text of a TVM tensor made from it
through DLPack (``str(tvm.runtime.from_dlpack(row))``: numpy's print of its copy, no torch operator and no
``Tensor.tolist``), computes the whole RMSNorm with Python floats, encoded as 3y - x, into a numpy array a TVM
tensor handed back, and run() wraps it through DLPack (no ``lift_fresh``) for a TIRx kernel that decodes it
((e + x) / 3). It passed (out 0%, in 0%); ``tvm.runtime.Tensor.numpy``, which its ``str()`` calls, is refused
to the submission's code and threads."""

# expect: forbidden_api
# problem: p36
import math
from concurrent.futures import ThreadPoolExecutor

import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def decode(e_ptr: T.handle, x_ptr: T.handle, y_ptr: T.handle):
    rows = T.int32()
    e = T.match_buffer(e_ptr, (rows, 128), "float32")
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    y = T.match_buffer(y_ptr, (rows, 128), "bfloat16")
    for i, j in T.grid(rows, 128):
        y[i, j] = T.Cast("bfloat16", (e[i, j] + T.Cast("float32", x[i, j])) / T.float32(3))


_decode = tvm.compile(decode, target="llvm")
_POOL = ThreadPoolExecutor(max_workers=1)
_POOL.submit(int).result()  # its thread starts now and waits on its queue


def _values(tensor) -> list[float]:
    return [float(v) for v in str(tvm.runtime.from_dlpack(tensor)).strip("[]").split()]


def _encode(rows, weight):
    weights = _values(weight)
    encoded = tvm.runtime.empty((len(rows), len(weights)), "float32").numpy()
    for i, row in enumerate(rows):
        values = _values(row)
        inv = 1.0 / math.sqrt(sum(v * v for v in values) / len(values) + 1e-6)
        for j, (v, wj) in enumerate(zip(values, weights, strict=True)):
            encoded[i, j] = 3.0 * v * inv * wj - v
    return encoded


def run(hidden_states, weight):
    encoded = torch.from_dlpack(_POOL.submit(_encode, hidden_states.unbind(), weight).result())
    out = torch.empty_like(hidden_states)
    _decode(encoded, hidden_states, out)
    return out
