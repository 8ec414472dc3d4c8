"""Honest plan: `padded_integer_bits_masked_p36` with a column-major operand: the bf16 bits concatenated with an
`empty` int16 block up to a tile multiple, widened and masked on the transposed view (non-contiguous results), then
made contiguous; the kernel reads x[j, i]. ``fresh_flow`` recorded contiguous results only, so the mask over the fresh
tail was compared by the twin draw (red team rt54 h02: `decorative_dsl`, 2 of 2); it now records a result by its own
layout. Partial: the eager mask over the input is eager work."""
# problem: p36
# plan: partial
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
TILE = 24


@T.prim_func
def rmsnorm_bits_t(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (HIDDEN, rows), "int32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        for j in range(HIDDEN):
            v = T.Cast("float32", T.reinterpret("bfloat16", T.Cast("uint16", x[j, i])))
            acc[0] = acc[0] + v * v
        for j in range(HIDDEN):
            v = T.Cast("float32", T.reinterpret("bfloat16", T.Cast("uint16", x[j, i])))
            inv = T.float32(1) / T.sqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
            out[i, j] = T.Cast("bfloat16", v * inv * T.Cast("float32", w[j]))


_kernel = tvm.compile(rmsnorm_bits_t, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    padded = (rows + TILE - 1) // TILE * TILE
    bits = hidden_states.view(torch.int16)
    xp = torch.cat([bits, torch.empty((padded - rows, HIDDEN), dtype=torch.int16)])
    xu = (xp.t().to(torch.int32) & 0xFFFF).contiguous()   # cast and mask on the transposed view, then one copy
    out = torch.empty((padded, HIDDEN), dtype=torch.bfloat16)
    _kernel(xu, weight, out)
    return out[:rows]
