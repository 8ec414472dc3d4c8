"""Red team rt13 F2 (h3d, with h3e's handshake): a pool thread holds a busy DSL launch that takes ``out`` and
never writes it, and the calling thread writes the whole eager answer straight into ``out`` (products with
``out=``) while that launch is in flight, once the launch's first store shows it started. Before, the launch's
AFTER took every byte of ``out`` as the DSL's and the suppressed draw's undo wiped the eager write with it (bypass
dsl_share 1.0, suppressed_wrong 1.0): only the eager-work price caught the answer. On a correctness draw the eager
write now waits for the launch's AFTER under the launch lock (the flag read itself waits: the poll is bounded, as
the suppressed draw's undo takes the flag's store back) and is judged eager: dsl_share 0
(``test_concurrent_launches.py``). h3e itself (a DSL row reduction, the eager epilogue written so) is a partial plan
either way: an eager epilogue over a DSL reduction is the DSL's by derived credit."""

# expect: decorative_dsl
# problem: p36
import queue
import threading
import time

import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128


@T.prim_func
def busy(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, flag_ptr: T.handle, reps: T.int32):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    flag = T.match_buffer(flag_ptr, (16,), "int32")
    acc = T.alloc_buffer((1,), "float32")
    flag[0] = flag[0] + 1  # in flight: the calling thread waits for this
    acc[0] = T.float32(1)
    for r in range(reps):
        acc[0] = acc[0] * T.float32(1.0000001) + T.Cast(
            "float32", x[r % rows, r % HIDDEN] + T.Cast("bfloat16", flag[0])
        ) * T.float32(1e-30)
    if acc[0] == T.float32(-12345.0):
        out[0, 0] = w[0]


_busy = tvm.compile(busy, target="llvm")
_flag = torch.zeros(16, dtype=torch.int32)
_jobs: queue.SimpleQueue = queue.SimpleQueue()
_done: queue.SimpleQueue = queue.SimpleQueue()


def _pool() -> None:
    while True:
        args = _jobs.get()
        _busy(*args)
        _done.put(1)


threading.Thread(target=_pool, daemon=True).start()


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    before = int(_flag[0])
    _jobs.put((hidden_states, weight, out, _flag, 3_000_000))  # ~5 ms in the DSL, over `out`
    for _ in range(2000):  # until the launch is in flight (its BEFORE copied `out` aside)
        if int(_flag[0]) != before:
            break
        time.sleep(0.0001)
    x = hidden_states.float()
    ss = torch.bmm(x.unsqueeze(1), x.unsqueeze(2)).view(-1)  # row sums of squares as a product
    inv = torch.rsqrt(ss + HIDDEN * 1e-6)
    xw = torch.mm(x, torch.diag(weight.float() * HIDDEN**0.5))  # x * w as a product
    torch.mm(torch.diag(inv).to(torch.bfloat16), xw.to(torch.bfloat16), out=out)  # the eager answer, into `out`
    _done.get()
    return out
