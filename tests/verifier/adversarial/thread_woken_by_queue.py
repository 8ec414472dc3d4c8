"""A thread started at import sleeps on a queue with no time limit (idle between calls); run() hands it the
inputs, it computes the whole RMSNorm with eager PyTorch (in its own thread, outside the audit's thread-local
dispatch mode) and hands back 3y + 1, which one TIRx launch decodes. A thread started before the call that runs
torch operators during a correctness draw fails it."""

# expect: decorative_dsl
# or: wrong_output, the thread's writes are memory no recorded writer left, erased before the launch reads them
# problem: p36
import queue
import threading

import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def decode(e_ptr: T.handle, y_ptr: T.handle):
    rows = T.int32()
    e = T.match_buffer(e_ptr, (rows, 128), "float32")
    y = T.match_buffer(y_ptr, (rows, 128), "bfloat16")
    for i, j in T.grid(rows, 128):
        y[i, j] = T.Cast("bfloat16", (e[i, j] - T.float32(1)) / T.float32(3))


_decode = tvm.compile(decode, target="llvm")
_jobs: queue.Queue = queue.Queue()
_answers: queue.Queue = queue.Queue()


def _helper() -> None:
    while True:
        x, w = _jobs.get()
        xf = x.float()
        y = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(torch.bfloat16)
        _answers.put(y.float() * 3 + 1)


threading.Thread(target=_helper, daemon=True).start()


def run(hidden_states, weight):
    _jobs.put((hidden_states, weight))
    encoded = _answers.get()
    out = torch.empty_like(hidden_states)
    _decode(encoded, out)
    return out
