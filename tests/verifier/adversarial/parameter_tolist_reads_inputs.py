"""The p36 example's kernel and eager inverse RMS, plus every input element read into Python through an
``nn.Parameter`` view (a Tensor subclass): the vault recorded a crossing's sizes for torch's own tensor class only, so
the read counted nothing (0% out; the same ``tolist()`` of the plain tensor: 98%, rejected). What enters the tensors
is counted either way; this case is about what leaves them."""

# expect: decorative_dsl
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


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    _ = torch.nn.Parameter(hidden_states, requires_grad=False).tolist()  # every input element, into Python
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    out = torch.empty_like(hidden_states)
    _scale_rows(hidden_states, inv_rms, weight, out)
    return out
