"""A thread started at import waits on a queue; run() hands it the inputs, it reads them with tolist() (in its own
thread: the hook reports to the audit's vault whichever thread calls it), computes the whole RMSNorm with Python
floats, encodes it as 3y - x and hands back a list, which run() lifts with torch.tensor and a TIRx kernel decodes
((e + x) / 3: the form of an honest residual epilogue, which the decode rule leaves alone).
No torch operator runs in the thread; what crosses is every input element out (the thread) and every output
element in (the calling thread)."""

# expect: decorative_dsl
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
_answers: queue.Queue = queue.Queue()


def _helper() -> None:
    while True:
        x, w = _jobs.get()
        weights = w.tolist()
        encoded = []
        for row in x.tolist():
            inv = 1.0 / math.sqrt(sum(v * v for v in row) / len(row) + 1e-6)
            encoded.append([3.0 * v * inv * wj - v for v, wj in zip(row, weights, strict=True)])
        _answers.put(encoded)


threading.Thread(target=_helper, daemon=True).start()


def run(hidden_states, weight):
    _jobs.put((hidden_states, weight))
    lifted = torch.tensor(_answers.get(), dtype=torch.float32)
    out = torch.empty_like(hidden_states)
    _decode(lifted, hidden_states, out)
    return out
