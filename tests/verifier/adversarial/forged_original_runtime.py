"""On timed calls (no dispatch mode active), calls the counting hook of its real TIRx function with the
real arguments but its own ``_original``, which computes the eager answer: a launch with the draws'
kernel and shapes whose time is the eager work. A hook's original is checked by the vault: nothing is
counted, so the timed calls launch no DSL kernel at all."""

# expect: not_dsl
# problem: p36
# static-scan: off
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
_fn = _scale_rows["scale_rows"]


def _eager(fn, x, inv, w, out):
    out.copy_((x.float() * inv[:, None] * w.float()).to(x.dtype))


def run(hidden_states, weight):
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    out = torch.empty_like(hidden_states)
    if torch._C._len_torch_dispatch_stack() > 0:
        _fn(hidden_states, inv_rms, weight, out)
    else:
        type(_fn).__call__(_fn, hidden_states, inv_rms, weight, out, _original=_eager)
    return out
