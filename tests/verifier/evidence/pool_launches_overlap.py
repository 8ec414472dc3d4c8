"""RMSNorm in one TIRx kernel over row thirds, launched at once from three threads of a pool made at import
(red team rt13 FP3: TVM's pool pinned to one thread, this is how a submission uses more cores). Each thread waits
at a barrier, then launches; each launch runs its row loop 300 times (the same result) so that the launches
overlap. On a correctness draw they run one at a time under the launch lock, each credited and undone as its own;
before, the first AFTER settled the bytes the others were still writing, and only one third was the DSL's."""

from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128
THREADS = 3


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for _rep, i in T.grid(300, rows):
        acc[0] = T.float32(0)
        for j in range(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        for j in range(HIDDEN):
            out[i, j] = T.Cast(
                "bfloat16",
                T.Cast("float32", x[i, j])
                * T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(1e-6))
                * T.Cast("float32", w[j]),
            )


_k = tvm.compile(rmsnorm, target="llvm")
_pool = ThreadPoolExecutor(max_workers=THREADS)
_start = Barrier(THREADS)


def _launch(x, w, out):
    _start.wait()
    _k(x, w, out)


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    bounds = [hidden_states.shape[0] * k // THREADS for k in range(THREADS + 1)]
    futures = [
        _pool.submit(_launch, hidden_states[bounds[k] : bounds[k + 1]], weight, out[bounds[k] : bounds[k + 1]])
        for k in range(THREADS)
    ]
    for f in futures:
        f.result()
    return out
