"""RMSNorm in one TIRx kernel whose epsilon and row count are passed by value as numpy numbers: ``np.float32``
and what ``np.prod`` of the leading sizes returns (``np.int64``), both of which TVM's FFI converts like Python
numbers (red team rt15b FP2: the launch was uncounted, ``not_dsl``)."""

import numpy as np
import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128
EPS = np.float32(1e-6)


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, rows: T.int32, eps: T.float32):
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in T.serial(rows):
        acc[0] = T.float32(0)
        for j in T.serial(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        acc[0] = T.rsqrt(acc[0] / T.float32(HIDDEN) + eps)
        for j in T.serial(HIDDEN):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * acc[0] * T.Cast("float32", w[j]))


_kernel = tvm.compile(rmsnorm, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    rows = np.prod(hidden_states.shape[:-1])
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states.view(-1, HIDDEN), weight, out.view(-1, HIDDEN), rows, EPS)
    return out
