"""The same TIRx kernel launched on every call with the same arguments but a row count: every row when audited
(a dispatch mode is active), none otherwise, the eager answer written beforehand. Kernels and shapes match the
draws', and the outputs of the timed calls are right. At SMOKE sizes a launch's fixed cost is most of this
kernel's time: it keeps 0.52-0.93 of the draws' DSL time, which passes the DSL-time rule (0.40). The launches
of the evidence calls change no byte of their arguments and leave no element of the output: the work rule
(``_coverage.WORK_SHARE``) rejects it (verifier README, "Timed calls run what the correctness draws checked")."""

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
    if audited:
        out = torch.empty_like(hidden_states)
        todo = hidden_states.shape[0]
    else:
        out = (hidden_states.float() * inv_rms[:, None] * weight.float()).to(hidden_states.dtype)
        todo = 0
    _scale_rows(hidden_states, inv_rms, weight, out, todo)
    return out
