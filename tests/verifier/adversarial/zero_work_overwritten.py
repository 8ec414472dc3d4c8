"""When not audited (a dispatch mode is active) the kernel does all its work into the output, on stale inputs
(a buffer of the input's shape kept from the first such call), and eager code then writes the answer over it:
the launch, its arguments' shapes, its DSL time and the bytes it changes are the draws', and the outputs are
right. None of the returned elements still holds what the launch wrote: the work rule (``_coverage.WORK_SHARE``,
the outputs' shares) rejects it."""

# expect: decorative_dsl
# problem: p36
# thorough: 12-17 s on two cores (the stale buffer's work on every call); the other zero_work_* cases run always
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
_stale: list[torch.Tensor] = []


def run(hidden_states, weight):
    audited = torch._C._len_torch_dispatch_stack() > 0
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    out = torch.empty_like(hidden_states)
    if audited:
        _scale_rows(hidden_states, inv_rms, weight, out)
        return out
    if not _stale:
        _stale.append(hidden_states.clone().neg_())
    _scale_rows(_stale[0], inv_rms, weight, out)
    out.copy_((hidden_states.float() * inv_rms[:, None] * weight.float()).to(hidden_states.dtype))
    return out
