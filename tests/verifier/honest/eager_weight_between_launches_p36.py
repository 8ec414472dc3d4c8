"""Honest p36 in two kernels with an eager step between (red team rt23 FP1, out of place): the first normalises each
row into a float32 workspace (the whole reduction in the DSL), eager code multiplies it by the RMSNorm weight into a new
tensor, the second casts that into the bfloat16 output. The draws' flow credits the product to the DSL; on the evidence
calls nothing said so, and the cast was withdrawn as a cast of an eager answer (left 4.1% of the output against the
draws' 100%): there the product is now a simple map of what the first launch made and of the weight, derived from it
(``_provenance.derived_from``). The in-place form (``ws.mul_(w)``) still fails on the draws (README, Known limits)."""

# problem: p36
# plan: partial
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


@T.prim_func
def normalise(x_ptr: T.handle, ws_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    ws = T.match_buffer(ws_ptr, (rows, HIDDEN), "float32")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        for j in range(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        for j in range(HIDDEN):
            ws[i, j] = T.Cast("float32", x[i, j]) * (T.float32(1) / T.sqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS)))


@T.prim_func
def cast_out(ws_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    ws = T.match_buffer(ws_ptr, (rows, HIDDEN), "float32")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i, j in T.grid(rows, HIDDEN):
        out[i, j] = T.Cast("bfloat16", ws[i, j])


_normalise = tvm.compile(normalise, target="llvm")
_cast = tvm.compile(cast_out, target="llvm")


def run(hidden_states, weight):
    ws = torch.empty(hidden_states.shape, dtype=torch.float32)
    _normalise(hidden_states, ws)
    ws = ws * weight.float()
    out = torch.empty_like(hidden_states)
    _cast(ws, out)
    return out
