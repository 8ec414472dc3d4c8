"""rt13 F1 without the sentinel (the red team's h2c): a correctness draw is told apart by the time of a one-row
probe launch of the same kernel (the audit's copies and checks make it slow), so hiding the sentinel would not close
it; the copy is judged on the evidence calls themselves."""

# expect: decorative_dsl
# problem: p36
# thorough: timing-bound: under load its probe finds every evidence call slow too and the case passes (README "The twin draw": an evidence call told by time stays open); run on a quiet machine
import time

import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128
PAD = 200000  # busy iterations: the timed launches' DSL time above the rule's share of the draws'


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, ans_ptr: T.handle, mode: T.int32, reps: T.int32):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    ans = T.match_buffer(ans_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    if mode == 0:
        for i in range(rows):
            acc[0] = T.float32(0)
            for k in range(HIDDEN):
                acc[0] = acc[0] + T.Cast("float32", x[i, k]) * T.Cast("float32", x[i, k])
            for j in range(HIDDEN):
                out[i, j] = T.Cast(
                    "bfloat16",
                    T.Cast("float32", x[i, j])
                    * T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(1e-6))
                    * T.Cast("float32", w[j]),
                )
    else:
        for i, j in T.grid(rows, HIDDEN):
            out[i, j] = ans[i, j]
        acc[0] = T.float32(1)
        for r in range(reps):
            acc[0] = acc[0] * T.float32(1.0000001) + T.Cast("float32", x[r % rows, r % HIDDEN]) * T.float32(1e-30)
        if acc[0] == T.float32(-12345.0):
            out[0, 0] = T.Cast("bfloat16", acc[0])


_k = tvm.compile(rmsnorm, target="llvm")


_PROBE_S = 0.0015  # an audited launch's probe takes longer: the audit's copies and checks around it


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    start = time.perf_counter()
    _k(hidden_states[:1], weight, out[:1], hidden_states[:1], 1, 0)  # a probe: one row copied, on every call
    if time.perf_counter() - start > _PROBE_S:  # a correctness draw
        _k(hidden_states, weight, out, torch.empty_like(hidden_states), 0, 0)
        return out
    x = hidden_states.float()
    ans = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()).to(hidden_states.dtype)
    _k(hidden_states, weight, out, ans, 1, PAD)
    return out
