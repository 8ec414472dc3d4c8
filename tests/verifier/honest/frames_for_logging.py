"""Honest kernel whose run() reports on itself the ways ordinary code does, each of which reads frames of the stack
run() is called on: a logger with the caller's function and line in its format (``findCaller``), a warning with
``stacklevel=2``, ``traceback.print_exc()`` and ``logging.exception`` of an exception it caught, and a short summary of
its own stack (``traceback.extract_stack``). The harness's frames below run() hold nothing to rebind and no secret,
so none of this is refused."""

# problem: p36
import logging
import sys
import traceback
import warnings

import torch
import tvm
from tvm.script import tirx as T


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


logging.basicConfig(stream=sys.stderr, format="%(funcName)s:%(lineno)d %(message)s", level=logging.INFO)
_log = logging.getLogger("kernel")
_calls = [0]


def _check(rows: int) -> None:
    if rows <= 0:
        raise ValueError("no rows")


def run(hidden_states, weight):
    _calls[0] += 1
    if _calls[0] == 1:
        _log.info(
            "first call: %d rows, called from %s", hidden_states.shape[0], traceback.extract_stack(limit=2)[0].name
        )
        warnings.warn("first call compiles nothing more", stacklevel=2)
        try:
            _check(0)
        except ValueError:
            traceback.print_exc()
            _log.exception("caught while checking")
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out
