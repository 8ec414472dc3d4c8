"""Does its DSL work only on the calls it takes for the verifier's evidence calls, knowing the plan of the calls:
the test fixes the order of the timing phase (warmups, the 50 scored calls, then the 10 evidence calls, in every
timing round; before it, 2 unscored calls ahead of each of the 6 correctness draws) so that counting its calls
guesses every evidence call right. Its kernel is slow (it does its rows
REPEATS times over) and eager code is faster: on the calls it takes for scored it launches the kernel with no
work to do, the eager answer written beforehand; on correctness draws and evidence calls, the slow real work.
Launch counts, signatures and the evidence calls' DSL time all hold: only the scored calls being faster than the
evidence calls by more than the evidence costs rejects it. REPEATS makes the gain large (scored calls at ~0.13 of
the evidence calls' CPU): the test is of the rule, not of its margin; at 200 repeats the ratio was 0.56-0.72
against an allowance of ~0.74 under CI load (README, Known limits: a marginal cheat of this kind)."""

# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
REPEATS = 2000
DRAW_WARMUPS = 6 * 2  # unaudited calls of the correctness phase (each draw's block starts with 2)
SCORED_CALLS = 10 + 50  # warmups, then the scored calls, before any evidence call
ROUND_CALLS = SCORED_CALLS + 10  # then the evidence calls; a second timing round starts over
calls: list[int] = []


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


_scale_rows = tvm.compile(scale_rows, target="llvm")


def run(hidden_states, weight):
    audited = torch._C._len_torch_dispatch_stack() > 0
    if not audited:
        calls.append(1)
    timing = len(calls) - 1 - DRAW_WARMUPS  # this call's place in the timing phase (negative: a draw's warm-up)
    watched = audited or timing < 0 or timing % ROUND_CALLS >= SCORED_CALLS
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    if watched:
        out = torch.empty_like(hidden_states)
        work = torch.tensor([hidden_states.shape[0], REPEATS], dtype=torch.int32)
    else:
        out = (hidden_states.float() * inv_rms[:, None] * weight.float()).to(hidden_states.dtype)
        work = torch.zeros(2, dtype=torch.int32)
    _scale_rows(hidden_states, inv_rms, weight, out, work)
    return out
