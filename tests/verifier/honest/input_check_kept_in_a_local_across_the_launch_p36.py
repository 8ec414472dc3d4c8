"""Honest (red team rt60 FP2): the plain RMSNorm kernel behind ``ok = torch.isfinite(x).all(); if not ok: raise``,
the check's result kept in a local while the kernel runs. Rejected ``decorative_dsl`` (125%) while every storage the
submission held at a launch counted as reached; on the cpu a TIRx kernel reads only its buffers, so only cuda, where a
kernel reads memory through a raw pointer, counts what is held then (``_provenance.priced_trail``)."""
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128
EPS = 1e-6


@T.prim_func
def rmsnorm_rows(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in T.serial(rows):
        acc[0] = T.float32(0)
        for j in range(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
        for j in range(HIDDEN):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_kernel = tvm.compile(rmsnorm_rows, target="llvm")
_outputs: dict[tuple, torch.Tensor] = {}


def run(hidden_states, weight):
    ok = torch.isfinite(hidden_states).all()
    if not ok:
        raise ValueError("rmsnorm: non-finite input")
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out
