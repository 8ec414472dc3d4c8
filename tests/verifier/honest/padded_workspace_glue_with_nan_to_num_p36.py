"""Honest full plan: a sum-of-squares workspace rounded up to a tile multiple (`torch.empty`), DSL launch 1 writes the
valid rows' sums, eager glue takes `nan_to_num(rsqrt(ss / H + eps))` over the whole workspace (its tail made of
unwritten memory: 0.0 on the draws, rsqrt of a reused block's bytes on a timed call), DSL launch 2 scales the valid
rows (it reads inv[i] for i < rows). What a pointwise operator made of fresh memory is fresh (``fresh_flow``): out of
the twin draw's comparison, which rejected it by 32 bytes (red team rt52 F4), and the stale draw's bytes there are
never read. Elements are fresh whole: a written float whose low byte held the sentinel's before was taken for fresh,
and the stale draw corrupted its row (3 runs in 4 before ``whole_elements``)."""
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
TILE = 24


@T.prim_func
def sumsq(x_ptr: T.handle, ss_ptr: T.handle):
    rows = T.int32()
    padded = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    ss = T.match_buffer(ss_ptr, (padded,), "float32")
    for i in range(rows):
        ss[i] = T.float32(0)
        for j in range(HIDDEN):
            ss[i] = ss[i] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])


@T.prim_func
def scale(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    padded = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (padded,), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i in range(rows):
        for j in range(HIDDEN):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv[i] * T.Cast("float32", w[j]))


_sumsq = tvm.compile(sumsq, target="llvm")
_scale = tvm.compile(scale, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    padded = (rows + TILE - 1) // TILE * TILE
    xp = hidden_states
    ss = torch.empty((padded,), dtype=torch.float32)
    _sumsq(xp, ss)
    inv = torch.nan_to_num(torch.rsqrt(ss / HIDDEN + EPS), nan=0.0, posinf=0.0, neginf=0.0)
    out = torch.empty_like(hidden_states)
    _scale(xp, inv, weight, out)
    return out
