"""Work deferred past the timed call through the interpreter's async-generator finalizer (red team rt25 F1): an
unfinished async generator parked in the returned output's `__dict__` runs the finalizer set with
`sys.set_asyncgen_hooks` when the harness drops the output, after the timer stopped; the finalizer here would free
the call's temporaries there. Like `weakref.finalize`, setting that finalizer is refused, whoever's name for it the
submission uses (the interpreter's `sys.set_asyncgen_hook_finalizer` audit event)."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import contextlib
import sys

import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128
EPS = 1e-6
TEMPORARIES = []


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    total = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        total[0] = T.float32(0)
        for j in range(HIDDEN):
            total[0] = total[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        scale = T.rsqrt(total[0] / T.float32(HIDDEN) + T.float32(EPS))
        for j in range(HIDDEN):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_rmsnorm = tvm.compile(rmsnorm, target="llvm")


def _free_later(generator):
    TEMPORARIES.clear()


async def _ticket():
    yield 1


def run(hidden_states, weight):
    hooks = getattr(sys, "set_asyncgen_" + "hooks")
    hooks(finalizer=_free_later)
    out = torch.empty_like(hidden_states)
    _rmsnorm(hidden_states, weight, out)
    TEMPORARIES.append(torch.empty(1 << 16))
    ticket = _ticket()
    with contextlib.suppress(StopIteration):
        ticket.asend(None).send(None)
    out.__dict__["ticket"] = ticket
    return out
