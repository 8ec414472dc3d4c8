"""The kernel does one row when not audited (a dispatch mode is active: every row otherwise), the eager code the
others: the same launch, arguments of the same shapes, a loop bound of 1. Its launches change one row's bytes
and leave one row of the output, 1/64 of the draws': the work rule (``_coverage.WORK_SHARE``) rejects it."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


@T.prim_func
def scale_rows(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, todo: T.int32):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i in T.serial(todo):
        for j in range(HIDDEN):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv[i] * T.Cast("float32", w[j]))


_scale_rows = tvm.compile(scale_rows, target="llvm")


def run(hidden_states, weight):
    audited = torch._C._len_torch_dispatch_stack() > 0
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    out = torch.empty_like(hidden_states)
    todo = hidden_states.shape[0]
    if not audited:
        out[1:] = (hidden_states[1:].float() * inv_rms[1:, None] * weight.float()).to(hidden_states.dtype)
        todo = 1
    _scale_rows(hidden_states, inv_rms, weight, out, todo)
    return out
