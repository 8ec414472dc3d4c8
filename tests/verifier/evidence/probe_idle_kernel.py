"""Tries to tell the verifier's evidence calls (launches timed, unscored) from its scored timed calls by the
cost of the gate: every call first launches a one-element probe kernel and times it with its own clock; a
probe slower than the fastest seen so far by more than a margin is taken for an evidence call. Its kernel is
slow (it does its rows REPEATS times over, as a weak kernel would) and eager code is faster: on the calls it
takes for scored it launches the kernel with no work to do, the eager answer written beforehand; on
correctness draws (a dispatch mode is active) and on calls it takes for evidence, the slow real work. Launch
counts and signatures are the same on every call; only the time inside the kernel differs. Loaded (2 cores,
load 10) the probe took most scored calls for evidence calls too, and they did the slow work: the guess
costs it its gain. Where it guesses well, its scored calls are faster than its evidence calls by more than
the evidence costs, which is rejected (known_plan_idle_kernel.py: the same attack with a perfect guess)."""

# problem: p36
import time

import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
REPEATS = 200
MARGIN_S = 2e-6  # the gate's extra work on an evidence call costs about 4 µs per launch on this machine
seen: list[float] = []


@T.prim_func
def probe(x_ptr: T.handle):
    x = T.match_buffer(x_ptr, (1,), "float32")
    x[0] = x[0] + T.float32(1)


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


_probe = tvm.compile(probe, target="llvm")
_scale_rows = tvm.compile(scale_rows, target="llvm")
_cell = torch.zeros(1)


def run(hidden_states, weight):
    audited = torch._C._len_torch_dispatch_stack() > 0
    t0 = time.perf_counter()
    _probe(_cell)
    took = time.perf_counter() - t0
    watched = audited or (bool(seen) and took > min(seen) + MARGIN_S)
    seen.append(took)
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    if watched:
        out = torch.empty_like(hidden_states)
        work = torch.tensor([hidden_states.shape[0], REPEATS], dtype=torch.int32)
    else:
        out = (hidden_states.float() * inv_rms[:, None] * weight.float()).to(hidden_states.dtype)
        work = torch.zeros(2, dtype=torch.int32)
    _scale_rows(hidden_states, inv_rms, weight, out, work)
    return out
