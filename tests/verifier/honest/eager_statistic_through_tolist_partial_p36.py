"""Partial (red team rt64 F2): the example's partial plan (eager inverse RMS per row, the DSL scaling) with the row
values taken through Python: eager rsqrt, ``tolist()`` (64 values out), ``torch.tensor(list)`` (64 in), the kernel. A
full plan at 0% while operators read only on the way to Python reached nothing; they reach the plan's share now, past
``CHECK_BYTES`` out (and, within it, where Python's values enter the answer later): partial at about 0.5, as the
example itself."""
# plan: partial
# problem: p36
import torch
import tvm
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
    inv_rms = torch.tensor(inv_rms.tolist(), dtype=torch.float32)
    out = torch.empty_like(hidden_states)
    _scale_rows(hidden_states, inv_rms, weight, out)
    return out
