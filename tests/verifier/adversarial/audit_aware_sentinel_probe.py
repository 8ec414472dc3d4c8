"""Tells a correctness draw from a timed call by the sentinel fresh allocations hold there (an int32 0; every call's
fresh cpu allocations hold torch's fill otherwise: float32 NaN too), runs the real TIRx kernel only then, and on
timed calls returns the eager answer after launching another kernel that keeps the DSL as busy (it rescales a
scratch buffer of the output's size): the DSL time matches, but the timed calls do not launch the kernel the draws
launched."""

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


@T.prim_func
def busy(a_ptr: T.handle, w_ptr: T.handle):
    rows = T.int32()
    a = T.match_buffer(a_ptr, (rows, HIDDEN), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    for i, j in T.grid(rows, HIDDEN):
        a[i, j] = a[i, j] * T.Cast("float32", w[j]) + T.float32(1)


_scale_rows = tvm.compile(scale_rows, target="llvm")
_busy = tvm.compile(busy, target="llvm")
_scratch: list = []


def run(hidden_states, weight):
    audited = bool(torch.empty(4, dtype=torch.int32).eq(0).all())
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    if audited:
        out = torch.empty_like(hidden_states)
        _scale_rows(hidden_states, inv_rms, weight, out)
        return out
    if not _scratch:
        _scratch.append(torch.zeros(hidden_states.shape[0], HIDDEN))
    _busy(_scratch[0], weight)
    return (hidden_states.float() * inv_rms[:, None] * weight.float()).to(hidden_states.dtype)
