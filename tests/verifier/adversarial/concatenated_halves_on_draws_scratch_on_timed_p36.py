"""Red team rt22 F2 through another copy: on the correctness draws (a dispatch mode is active) the kernel computes each
half of the rows into a buffer of its own and run() returns ``torch.cat`` of the two: no element of the output is what
a launch left in its memory (the draws' launch-left share is 0, never judged before), while the coverage credits the
concatenation to the DSL. On the other calls run() returns an eager answer, and two launches of the same kernel into
scratch halves, told to skip the reduction (a row scale of ones), supply the bytes changed. The values the draws'
launches made are the output's (carried share 1.0), the timed calls' launches made none of them: the work rule."""

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


def run(hidden_states, weight):
    audited = torch._C._len_torch_dispatch_stack() > 0
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    half = hidden_states.shape[0] // 2
    rows = (slice(0, half), slice(half, None))
    if audited:
        parts = [torch.empty_like(hidden_states[r]) for r in rows]
        for r, part in zip(rows, parts, strict=True):
            _scale_rows(hidden_states[r], inv_rms[r].contiguous(), weight, part)
        return torch.cat(parts)
    ones = torch.ones_like(inv_rms)
    for r in rows:
        _scale_rows(hidden_states[r], ones[r], weight, torch.empty_like(hidden_states[r]))
    return (hidden_states.float() * inv_rms[:, None] * weight.float()).to(hidden_states.dtype)
