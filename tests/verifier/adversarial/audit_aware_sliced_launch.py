"""Runs the real TIRx kernel on every row when a dispatch mode is active (a correctness draw), and on
timed calls the same kernel on one row, eager PyTorch on the rest: the timed calls launch the kernel on
other shapes than the draws did."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from torch.utils._python_dispatch import _get_current_dispatch_mode
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


@T.prim_func
def scale_rows(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i, j in T.grid(rows, HIDDEN):
        out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv[i] * T.Cast("float32", w[j]))


_scale_rows = tvm.compile(scale_rows, target="llvm")


def run(hidden_states, weight):
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    if _get_current_dispatch_mode() is not None:
        out = torch.empty_like(hidden_states)
        _scale_rows(hidden_states, inv_rms, weight, out)
        return out
    out = (hidden_states.float() * inv_rms[:, None] * weight.float()).to(hidden_states.dtype)
    _scale_rows(hidden_states[:1], inv_rms[:1], weight, out[:1])
    return out
