"""Part of the work in another thread: a thread pool warmed at import (its worker exists before any call and
idles on its queue) computes each row's inverse RMS with eager PyTorch; the TIRx kernel does the rest (the
products with x and the weight, the cast). The row reduction is the problem's real work and it happens outside
the audit's thread-local dispatch mode: a pool thread that runs torch operators during a correctness draw fails it."""

# expect: decorative_dsl
# or: wrong_output, the pool thread's writes are memory no recorded writer left, erased before the launch reads them
# problem: p36
from concurrent.futures import ThreadPoolExecutor

import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def scale_rows(x_ptr: T.handle, s_ptr: T.handle, w_ptr: T.handle, y_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    s = T.match_buffer(s_ptr, (rows, 1), "float32")
    w = T.match_buffer(w_ptr, (128,), "bfloat16")
    y = T.match_buffer(y_ptr, (rows, 128), "bfloat16")
    for i, j in T.grid(rows, 128):
        y[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * s[i, 0] * T.Cast("float32", w[j]))


_scale_rows = tvm.compile(scale_rows, target="llvm")
_pool = ThreadPoolExecutor(max_workers=1)
_pool.submit(int).result()  # the worker thread exists (and idles) before the first call


def _inverse_rms(x: torch.Tensor) -> torch.Tensor:
    return torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)


def run(hidden_states, weight):
    scales = _pool.submit(_inverse_rms, hidden_states).result()
    out = torch.empty_like(hidden_states)
    _scale_rows(hidden_states, scales, weight, out)
    return out
