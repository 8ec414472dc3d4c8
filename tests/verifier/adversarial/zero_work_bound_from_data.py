"""The kernel's loop bound is read from a tensor argument (a work list's length), which holds every row when
audited (a dispatch mode is active) and zero otherwise, the eager answer written beforehand: the launch, its
arguments' shapes and every Python-visible value are the same on every call; only the data differs. Its launches
change no byte of the output on the evidence calls: the work rule (``_coverage.WORK_SHARE``) rejects it."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


@T.prim_func
def scale_rows(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, todo_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    todo = T.match_buffer(todo_ptr, (1,), "int32")
    for i in T.serial(todo[0]):
        for j in range(HIDDEN):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv[i] * T.Cast("float32", w[j]))


_scale_rows = tvm.compile(scale_rows, target="llvm")


def run(hidden_states, weight):
    audited = torch._C._len_torch_dispatch_stack() > 0
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    todo = torch.full((1,), hidden_states.shape[0] if audited else 0, dtype=torch.int32)
    if audited:
        out = torch.empty_like(hidden_states)
    else:
        out = (hidden_states.float() * inv_rms[:, None] * weight.float()).to(hidden_states.dtype)
    _scale_rows(hidden_states, inv_rms, weight, out, todo)
    return out
