"""Runs its TIRx kernel honestly on the first 16 calls (the correctness draws and the warmups, a fixed
order) and on most later ones, but on two calls in five after them launches the same kernel with the same
arguments told to do no rows, and returns the untouched zeros: signatures and the median DSL time stay the
draws', and 3 re-checked timed calls would miss all ~20 wrong ones one time in five."""

# expect: wrong_output
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
HONEST_CALLS = 16
_calls = [0]


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


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    _calls[0] += 1
    skip = _calls[0] > HONEST_CALLS and _calls[0] % 5 in (0, 2)
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    out = torch.zeros_like(hidden_states)
    todo = torch.tensor([0 if skip else hidden_states.shape[0]], dtype=torch.int32)
    _scale_rows(hidden_states, inv_rms, weight, out, todo)
    return out
