"""Tells the verifier's watched calls from its scored calls by the interpreter's count of allocated blocks across
its first two launches (as evidence_aware_many_launches_p36.py), and on scored calls launches its second kernel
over one row, eager code making the answer, which it makes three times over so that the scored calls cost no less
than the watched ones (the time rule then cannot tell). Launch counts and signatures are the watched calls'; the
bytes its scored launches span are not: one row of the output against all of them (``_judge.scored_footprint``).
Where its guess misses three evidence calls or more (a loaded machine), their one-row launches fail the kernel
signatures first (``_coverage.kernels_check``); fewer misses leave the evidence calls' median footprint whole."""

# expect: decorative_dsl
# problem: p36
import sys

import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
WATCHED_BLOCKS = 16
EAGER_REPEATS = 3


@T.prim_func
def inv_rms(x_ptr: T.handle, inv_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    for i in range(rows):
        inv[i] = T.float32(0)
        for j in range(HIDDEN):
            inv[i] = inv[i] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        inv[i] = T.rsqrt(inv[i] / T.float32(HIDDEN) + T.float32(EPS))


@T.prim_func
def scale_rows(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i, j in T.grid(rows, HIDDEN):
        out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv[i] * T.Cast("float32", w[j]))


_inv_rms = tvm.compile(inv_rms, target="llvm")
_scale_rows = tvm.compile(scale_rows, target="llvm")


def run(hidden_states, weight):
    inv = torch.empty(hidden_states.shape[0], dtype=torch.float32)
    out = torch.empty_like(hidden_states)
    grown = 0
    for _ in range(2):  # the count of blocks read across two launches (one misses a watched call now and then)
        before = sys.getallocatedblocks()
        _inv_rms(hidden_states, inv)
        grown = max(grown, sys.getallocatedblocks() - before)
    if grown > WATCHED_BLOCKS:
        _scale_rows(hidden_states, inv, weight, out)
        return out
    _scale_rows(hidden_states[:1], inv[:1], weight, out[:1])  # a token launch, the same kernel and dtypes
    for _ in range(EAGER_REPEATS):
        x = hidden_states.float()
        out = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()).to(hidden_states.dtype)
    return out
