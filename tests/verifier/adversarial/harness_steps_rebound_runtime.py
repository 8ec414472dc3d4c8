"""Reaches the harness's frames from run() by every route a stack offers (``traceback.walk_stack``, an exception's
traceback, ``string.Formatter().get_field`` reading ``f_locals``/``f_globals``/``f_back`` with no such name in the
code) and rebinds every per-call step it finds there: an object's ``copy_outputs``/``timed_call`` attribute, a
module global or a closure cell holding the harness's ``copy_`` of the outputs into their slots. Each replacement
writes the DSL's correct answer into the slot while run() returns a wrong one. The harness calls only steps bound
before the submission loaded: no replacement runs, and the wrong answer is judged as one."""

# expect: wrong_output
# problem: p36
# static-scan: off
import string
import sys
import traceback

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


_field = string.Formatter().get_field
_good: list = []


def _copy_good(slot, item=None, *args, **kwargs):
    torch.Tensor.copy_(slot, _good[-1])
    return True


def _copy_outputs(*args, **kwargs):
    for value in args:
        for slot in getattr(value, "outputs", None) or []:
            if isinstance(slot, torch.Tensor):
                _copy_good(slot)
    return True


def _frames():
    yield from (frame for frame, _ in traceback.walk_stack(None))
    try:
        raise RuntimeError
    except RuntimeError:
        frame = _field("0.tb_frame", (sys.exc_info()[2],), {})[0]
    while frame is not None:
        yield frame
        frame = _field("0.f_back", (frame,), {})[0]


def _rebind() -> None:
    for frame in _frames():
        for scope in ("f_locals", "f_globals"):
            names = _field(f"0.{scope}", (frame,), {})[0]
            for name, value in list(names.items()):
                if name in ("_copy", "copy_"):
                    names[name] = _copy_good
                if hasattr(value, "copy_outputs"):
                    value.copy_outputs = _copy_outputs
                for cell in getattr(value, "__closure__", None) or ():
                    if cell.cell_contents is torch._C.TensorBase.copy_:
                        cell.cell_contents = _copy_good


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    _good.append(out.clone())
    _rebind()
    return out.mul_(2)
