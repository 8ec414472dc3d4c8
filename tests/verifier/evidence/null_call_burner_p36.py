"""The honest p36 kernel, and a thread beside it that burns CPU while the harness runs its null calls: it waits on
an event run() sets when it returns, lets the harness's own steps after the call go by, and, where run() was not
entered again meanwhile (the harness is timing one of its null calls, or several), burns in short slices, letting
the calling thread run between them, until run() is entered again. The null calls' cost, which the trusted clock
takes off every call as the harness's own, would rise, and with it the allowance for time the timed calls leave
unreported. The thread waits where only run() wakes it, so the harness's check for threads still working after a
call finds it idle; it burns after no correctness draw (a dispatch mode is active there), where the harness
watches the threads the submission started before the call too.

Not in adversarial/: other timing rules may catch it by chance of the load; ``test_null_call_calibration`` judges
it by the calibration alone."""

import threading
import time

import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
SETTLE_S = 0.0002  # the harness's steps after a call and before the next one's run(), on a quiet host
BURN_S = 0.003  # the longest the thread burns after one call (a run of null calls)
SLICE_S = 0.00005


@T.prim_func
def scale_rows(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i, j in T.grid(rows, HIDDEN):
        out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv[i] * T.Cast("float32", w[j]))


_scale_rows = tvm.compile(scale_rows, target="llvm")
_returned = threading.Event()
_entered = [0]


def _burn_during_null_calls() -> None:
    while True:
        _returned.wait()
        _returned.clear()
        calls = _entered[0]
        time.sleep(SETTLE_S)
        start = time.thread_time()
        while _entered[0] == calls and time.thread_time() - start < BURN_S:
            slice_end = time.thread_time() + SLICE_S
            while time.thread_time() < slice_end:
                pass
            time.sleep(0)  # the calling thread runs the harness's steps meanwhile


_burner: list[threading.Thread] = []


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    _entered[0] += 1
    if not _burner:
        _burner.append(threading.Thread(target=_burn_during_null_calls, daemon=True))
        _burner[0].start()
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    out = torch.empty_like(hidden_states)
    _scale_rows(hidden_states, inv_rms, weight, out)
    if not torch._C._len_torch_dispatch_stack():  # not on a correctness draw, where threads are watched closely
        _returned.set()
    return out
