"""Honest two-kernel pipeline, as the MoE solutions are: the first TIRx kernel computes how many rows the
second processes (a routing count, in a fresh int32 buffer) and the second loops over that many rows.
With launches suppressed the count is whatever the fresh buffer held before the first kernel: the second
kernel must then see no rows at all, never a count that walks it off its buffers (on the H200 such
counts made the MoE pipelines' kernels fault, and the draw could not be judged)."""

# problem: p36
# plan: partial
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


@T.prim_func
def count_rows(x_ptr: T.handle, count_ptr: T.handle):
    rows = T.int32()
    T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    count = T.match_buffer(count_ptr, (1,), "int32")
    count[0] = rows


@T.prim_func
def scale_rows(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, count_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    count = T.match_buffer(count_ptr, (1,), "int32")
    for i in T.serial(count[0]):
        for j in range(HIDDEN):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv[i] * T.Cast("float32", w[j]))


_count_rows = tvm.compile(count_rows, target="llvm")
_scale_rows = tvm.compile(scale_rows, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    count = torch.empty(1, dtype=torch.int32)
    _count_rows(hidden_states, count)
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    out = torch.empty_like(hidden_states)
    _scale_rows(hidden_states, inv_rms, weight, out, count)
    return out
