"""Splits each of its calls into several timed calls by sending the timer's own requests from inside run().

In a block the harness sends the timer ADVANCE (to the next call's slot), START and STOP for every call. Sent
from inside run() as STOP, ADVANCE, START, they would close this call's slot at once and time the rest of its
work in the next slot, so that most slots read almost nothing; the harness's own calls then run out of slots
(or, with any other order, meet a slot in the wrong state), which the timer's vault marks and the verifier
judges.
"""

# expect: harness_tamper
# problem: p36
# static-scan: off
import sys
import time

import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    w = T.match_buffer(w_ptr, (128,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        for j in range(128):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        scale = T.rsqrt(acc[0] / T.float32(128) + T.float32(1e-6))
        for j in range(128):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_kernel = tvm.compile(rmsnorm, target="llvm")


def _harness():
    frame = sys._getframe()
    timer = worker = None
    while frame is not None:
        timer = timer or frame.f_locals.get("_timer")
        worker = worker or getattr(frame.f_locals.get("self"), "report_end", None)
        finish = frame.f_locals.get("_finish")  # the harness's end of a call (its gate record) as a bound step
        worker = worker or (finish and (lambda finish=finish: finish()))
        frame = frame.f_back
    return timer, worker


_draws_seen = [0]


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    timer, report_end = _harness()
    _draws_seen[0] += torch._C._len_torch_dispatch_stack() > 0  # the correctness draws are audited
    if timer is not None and report_end is not None and _draws_seen[0] >= 6:  # the timed calls come after them
        for _ in range(3):  # three slots that each launch the kernel once and end at once, then the real work
            _kernel(hidden_states, weight, out)
            now = time.perf_counter()
            timer((2, now, now))
            report_end()  # the gate's record of this slot's launches, as the harness writes it after a call
            timer(4)
            timer(1)
    t = time.thread_time()
    while time.thread_time() - t < 0.002:
        pass
    _kernel(hidden_states, weight, out)
    return out
