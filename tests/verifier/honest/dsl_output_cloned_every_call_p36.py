"""Honest full plan whose kernel's result eager code copies on every call: the RMSNorm kernel writes a workspace kept
across calls, and run() returns ``workspace.clone()``. No element of the output is what a launch left in its memory
(the launch-left share is 0, on the draws and the timed calls alike); every value is one the launch made (the carried
share, ``_provenance.carried_share``, ~1.0 on both), so the work rule judges it and it holds."""

# problem: p36
import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128


@T.prim_func
def norm(x_ptr: T.handle, w_ptr: T.handle, o_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    o = T.match_buffer(o_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        for k in range(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, k]) * T.Cast("float32", x[i, k])
        for j in range(HIDDEN):
            o[i, j] = T.Cast(
                "bfloat16",
                T.Cast("float32", x[i, j])
                * T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(1e-6))
                * T.Cast("float32", w[j]),
            )


_norm = tvm.compile(norm, target="llvm")
_workspace: dict[tuple[int, ...], torch.Tensor] = {}


def run(hidden_states, weight):
    key = tuple(hidden_states.shape)
    if key not in _workspace:
        _workspace[key] = torch.empty_like(hidden_states)
    _norm(hidden_states, weight, _workspace[key])
    return _workspace[key].clone()
