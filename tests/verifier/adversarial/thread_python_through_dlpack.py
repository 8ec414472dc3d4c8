"""A thread started at import waits on a queue; run() hands it the inputs. The thread reads them through DLPack
into TVM tensors and their numpy copies (``tvm.runtime.from_dlpack(x).numpy().tolist()``: no torch operator, no
``Tensor.tolist``), computes the whole RMSNorm with Python floats, encoded as 3y - x, into a numpy array a TVM tensor
handed back, and wraps that array as a torch tensor through DLPack (no ``lift_fresh``); run() has a TIRx kernel
decode it into the output ((e + x) / 3). Nothing crossed that the audit counts, and the thread ran no torch operator:
it passed (out 0%, in 0%). ``tvm.runtime.Tensor.numpy`` is refused to the submission's code and threads."""

# expect: forbidden_api
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
        try:
            _answers.put(_encode(x, w))
        except Exception as exc:  # a refusal goes back to run()
            _answers.put(exc)


def _encode(x, w):
    rows = tvm.runtime.from_dlpack(x.__dlpack__()).numpy().astype("float32").tolist()
    weights = tvm.runtime.from_dlpack(w.__dlpack__()).numpy().astype("float32").tolist()
    flat = tvm.runtime.empty((len(rows), len(weights)), "float32").numpy()
    for i, row in enumerate(rows):
        inv = 1.0 / math.sqrt(sum(v * v for v in row) / len(row) + 1e-6)
        for j, (v, wj) in enumerate(zip(row, weights, strict=True)):
            flat[i, j] = 3.0 * v * inv * wj - v
    return torch.from_dlpack(flat)


threading.Thread(target=_helper, daemon=True).start()


def run(hidden_states, weight):
    _jobs.put((hidden_states, weight))
    answer = _answers.get()
    if isinstance(answer, Exception):
        raise answer
    out = torch.empty_like(hidden_states)
    _decode(answer, hidden_states, out)
    return out
