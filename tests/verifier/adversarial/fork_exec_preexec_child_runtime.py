"""Runtime guards alone (red team rt11 F2): ``fork_exec`` with a ``preexec_fn``, reached as ``subprocess._fork_exec`` of
a module torch imported: the child is a forked copy of the worker running the submission's Python, sharing the call's
memory (here it only writes a byte to a pipe before exec). No audit event: refused by identity and by the worker's
process filter. The kernel is otherwise honest."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import os

import torch
import torch.utils.collect_env as _env
import tvm
from tvm.script import tirx as T

_fe = _env.subprocess._fork_exec


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


def run(hidden_states, weight):
    r, w = os.pipe()

    def in_the_child():
        os.write(w, b"x")

    pid = _fe(
        [b"/bin/sh", b"-c", b"true"],
        [b"/bin/sh"],
        True,
        (),
        None,
        None,
        -1,
        -1,
        -1,
        -1,
        -1,
        -1,
        r,
        w,
        False,
        False,
        -1,
        None,
        None,
        -1,
        -1,
        in_the_child,
        False,
    )
    os.waitpid(pid, 0)
    os.close(r)
    os.close(w)
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out
