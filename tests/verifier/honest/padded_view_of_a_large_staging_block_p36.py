"""Honest full plan over a padded view of a staging block larger than ``FRESH_MASK_BYTES`` (64 MiB): the rows are
copied into the first rows of a fresh 73 MiB `torch.empty` block, a DSL launch sums the squares of every padded row
(the tail rows unwritten), eager `rsqrt`, a DSL launch scales the valid rows. Fresh memory that large written in part
is tracked by 4 KiB chunks (the written region's edge chunks by byte: ``left_fresh``), once fresh whole and neither
compared nor given (red team rt54 b03's switch hid there); the tail rows stay fresh, as in a small buffer."""

# problem: p36
# thorough: ~30 s on two cores: a 73 MiB staging block filled, tracked by chunks and compared on every watched call
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
TILE = 24
STAGING_ROWS = 300_000  # 73 MiB: past FRESH_MASK_BYTES


@T.prim_func
def sumsq(x_ptr: T.handle, ss_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    ss = T.match_buffer(ss_ptr, (rows,), "float32")
    for i in range(rows):
        ss[i] = T.float32(0)
        for j in range(HIDDEN):
            ss[i] = ss[i] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])


@T.prim_func
def scale(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
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
    # a staging block far larger than the call needs (kept by no one: fresh each call), its first rows written
    xp = torch.empty((STAGING_ROWS, HIDDEN), dtype=torch.bfloat16)[:padded]
    xp[:rows].copy_(hidden_states)
    ss = torch.empty((padded,), dtype=torch.float32)
    _sumsq(xp, ss)
    inv = torch.rsqrt(ss / HIDDEN + EPS)
    out = torch.empty((padded, HIDDEN), dtype=torch.bfloat16)
    _scale(xp, inv, weight, out)
    return out[:rows]
