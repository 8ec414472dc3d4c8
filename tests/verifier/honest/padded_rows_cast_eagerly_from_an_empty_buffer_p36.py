"""Honest full plan over padded rows: the rows are copied into a ``torch.empty`` buffer padded to a tile multiple,
the whole buffer is cast to float32 eagerly (the cast reads the unwritten tail), one TIRx kernel normalises every
padded row, and the valid rows are returned as a view. The cast of the tail is NaN on the draws (the sentinel) and
the cast of whatever the block held on a timed call: bytes made of fresh memory, no constant (red team rt51 k01, once
rejected by the fixed-contents rule), and left out of the twin draw's comparison as NaN."""

# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
TILE = 24


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        for j in range(HIDDEN):
            acc[0] = acc[0] + x[i, j] * x[i, j]
        for j in range(HIDDEN):
            inv = T.float32(1) / T.sqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
            out[i, j] = T.Cast("bfloat16", x[i, j] * inv * T.Cast("float32", w[j]))


_kernel = tvm.compile(rmsnorm, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    padded = (rows + TILE - 1) // TILE * TILE
    xp = torch.empty((padded, HIDDEN), dtype=torch.bfloat16)
    xp[:rows].copy_(hidden_states)
    xf = xp.float()
    out = torch.empty((padded, HIDDEN), dtype=torch.bfloat16)
    _kernel(xf, weight, out)
    return out[:rows]
