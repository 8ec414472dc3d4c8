"""Looks for the provenance audit's secret sample positions (the output elements it reads on every call) in every
harness frame's locals and globals and one level into the objects there (a Worker, its setup dict), reading them as
F4's red team did (``traceback.walk_stack``, ``string.Formatter().get_field("0.f_locals", ...)``). Were they found,
a submission would compute only those elements with its DSL; this one returns its correct answer when it finds them
and a wrong one when it does not: a verdict other than wrong_output means the positions were reachable. They live in
the provenance vault alone."""

# expect: wrong_output
# problem: p36
# static-scan: off
import string
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


def _holds_positions(value, depth=0) -> bool:
    if isinstance(value, dict):
        if "sample_positions" in value:
            return True
        values = list(value.values())
    else:
        values = list(getattr(value, "__dict__", {}).values())
    return depth < 2 and any(
        _holds_positions(v, depth + 1) for v in values if isinstance(v, dict) or hasattr(v, "__dict__")
    )


def _positions_found() -> bool:
    for frame, _ in traceback.walk_stack(None):
        for scope in ("f_locals", "f_globals"):
            names = _field(f"0.{scope}", (frame,), {})[0]
            if any(_holds_positions(v) for v in list(names.values())):
                return True
    return False


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out if _positions_found() else out.mul_(2)
