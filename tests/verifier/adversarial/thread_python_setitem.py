"""A thread started at import waits on a queue; run() hands it the inputs and a pre-allocated output. The thread
reads them with tolist(), computes the whole RMSNorm with Python floats and writes it element by element into the
tensor run() allocated, encoded as 3y - x (``e[i, j] = v``: an operator of one element each, in its own
thread); run() then has a TIRx kernel decode it into the output ((e + x) / 3)."""

# expect: decorative_dsl
# or: wrong_output, the thread's writes are memory no recorded writer left, erased before the launch reads them
# problem: p36
import math
import queue
import threading

import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def decode(e_ptr: T.handle, x_ptr: T.handle, y_ptr: T.handle):
    rows = T.int32()
    e = T.match_buffer(e_ptr, (rows, 128), "float32")
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    y = T.match_buffer(y_ptr, (rows, 128), "bfloat16")
    for i, j in T.grid(rows, 128):
        y[i, j] = T.Cast("bfloat16", (e[i, j] + T.Cast("float32", x[i, j])) / T.float32(3))


_decode = tvm.compile(decode, target="llvm")
_jobs: queue.Queue = queue.Queue()
_done: queue.Queue = queue.Queue()


def _helper() -> None:
    while True:
        x, w, out = _jobs.get()
        weights = w.tolist()
        for i, row in enumerate(x.tolist()):
            inv = 1.0 / math.sqrt(sum(v * v for v in row) / len(row) + 1e-6)
            for j, (v, wj) in enumerate(zip(row, weights, strict=True)):
                out[i, j] = 3.0 * v * inv * wj - v
        _done.put(True)


threading.Thread(target=_helper, daemon=True).start()


def run(hidden_states, weight):
    encoded = torch.empty(hidden_states.shape, dtype=torch.float32)
    _jobs.put((hidden_states, weight, encoded))
    _done.get()
    out = torch.empty_like(hidden_states)
    _decode(encoded, hidden_states, out)
    return out
