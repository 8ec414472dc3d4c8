"""Honest plan: the input's bf16 bits (an int16 view) concatenated with a `torch.empty` int16 block up to a tile
multiple, their magnitudes' bits (`& 0x7FFF`) reduced eagerly to each padded row's largest (`amax(1)`: a padded
row's made of fresh memory), and one TIRx kernel normalises every padded row prescaled by its largest magnitude (the
bits read back as bf16), which RMSNorm's scale invariance leaves the answer unchanged by; the valid rows are returned
as a view. A padded row's maximum is what a reduction made of fresh memory (0 on a draw, a reused block's bits on a
timed call): the twin draw compared it and rejected the plan until a reduction's result over fresh elements was fresh
(``fresh_lines``). Partial: the eager mask over the input is eager work."""
# problem: p36
# plan: partial
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
TILE = 24


@T.prim_func
def rmsnorm_prescaled(x_ptr: T.handle, m_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "int16")
    m = T.match_buffer(m_ptr, (rows,), "int16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        scale = T.max(T.Cast("float32", T.reinterpret("bfloat16", T.Cast("uint16", m[i]))), T.float32(1e-30))
        for j in range(HIDDEN):
            v = T.Cast("float32", T.reinterpret("bfloat16", T.Cast("uint16", x[i, j]))) / scale
            acc[0] = acc[0] + v * v
        for j in range(HIDDEN):
            v = T.Cast("float32", T.reinterpret("bfloat16", T.Cast("uint16", x[i, j]))) / scale
            inv = T.float32(1) / T.sqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS) / (scale * scale))
            out[i, j] = T.Cast("bfloat16", v * inv * T.Cast("float32", w[j]))


_kernel = tvm.compile(rmsnorm_prescaled, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    padded = (rows + TILE - 1) // TILE * TILE
    bits = torch.cat([hidden_states.view(torch.int16), torch.empty((padded - rows, HIDDEN), dtype=torch.int16)])
    largest = (bits & 0x7FFF).amax(1)
    out = torch.empty((padded, HIDDEN), dtype=torch.bfloat16)
    _kernel(bits, largest, weight, out)
    return out[:rows]
