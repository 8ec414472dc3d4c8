"""Honest p36 kernel whose import calls ``_thread.interrupt_main()`` from a thread and waits: no signal has a Python
handler in the worker (red team rt38 F5), so no KeyboardInterrupt lands anywhere, in its own code or the harness's."""

import _thread
import threading
import time

import torch
import tvm
from tvm.script import tirx as T

_interrupter = threading.Thread(target=_thread.interrupt_main)
_interrupter.start()
_interrupter.join()
try:
    time.sleep(0.05)
except KeyboardInterrupt as exc:
    raise RuntimeError("a KeyboardInterrupt reached the submission") from exc


@T.prim_func
def rms(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    w = T.match_buffer(w_ptr, (128,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        for j in range(128):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        acc[0] = T.rsqrt(acc[0] / T.float32(128) + T.float32(1e-6))
        for j in range(128):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * acc[0] * T.Cast("float32", w[j]))


_KERNEL = tvm.compile(rms, target="llvm")


def run(x, w):
    out = torch.empty_like(x)
    _KERNEL(x, w, out)
    return out
