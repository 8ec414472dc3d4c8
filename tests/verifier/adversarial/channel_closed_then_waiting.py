"""A correct kernel whose run() closes the worker's channel to the verifier (the socket found among its open
descriptors), then waits (it never returns): the verifier finds the channel closed while the process still runs.
Only the worker's own process can do that: tampering (``harness_tamper``), not a crash. The guards refuse the call
first (``os.close`` on the harness's channel, whoever calls: ``forbidden_api``); the verifier's own judgement of a
channel changed under the harness stays tested by ``channel_closed_through_epoll_runtime.py``, a route no guard
watches."""

# expect: forbidden_api
# problem: p36
import os
import stat
import time

import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


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


def _channel() -> int:
    for fd in range(3, 64):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                return fd
        except OSError:
            continue
    return -1


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    out = torch.empty_like(hidden_states)
    _scale_rows(hidden_states, inv_rms, weight, out)
    os.close(_channel())
    time.sleep(60)
    return out
