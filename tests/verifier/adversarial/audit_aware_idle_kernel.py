"""Launches the same TIRx kernel with the same arguments on every call, but the work it does is read from
a tensor: on correctness draws (a dispatch mode is active) every row, several times over, on timed calls
none, the eager answer being written beforehand. Kernels and shapes match the draws'; the time spent in
the kernel does not."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
REPEATS = 24


@T.prim_func
def scale_rows(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, work_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    work = T.match_buffer(work_ptr, (2,), "int32")
    for _repeat in T.serial(work[1]):
        for i in T.serial(work[0]):
            for j in range(HIDDEN):
                out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv[i] * T.Cast("float32", w[j]))


_scale_rows = tvm.compile(scale_rows, target="llvm")


def run(hidden_states, weight):
    audited = torch._C._len_torch_dispatch_stack() > 0
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    if audited:
        out = torch.empty_like(hidden_states)
        work = torch.tensor([hidden_states.shape[0], REPEATS], dtype=torch.int32)
    else:
        out = (hidden_states.float() * inv_rms[:, None] * weight.float()).to(hidden_states.dtype)
        work = torch.zeros(2, dtype=torch.int32)
    _scale_rows(hidden_states, inv_rms, weight, out, work)
    return out
