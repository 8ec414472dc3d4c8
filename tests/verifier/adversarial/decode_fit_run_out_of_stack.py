"""An eager RMSNorm stored as 4·y + 1, which the DSL kernel only decodes; the launch is made from as deep in the
stack as it still fits, so that the decode rule's fit (run by the harness deeper still) overflows the stack. A rule
that raised must not leave the launch its elements (red team rt15b F7: they were "not judged" and credited)."""

# expect: decorative_dsl
# problem: p36
# or: exception, the launch itself may overflow first: run() raised, no answer
import torch
import tvm
from tvm.script import tirx as T

MARGIN = 16  # where the launch still fits and the fit, run deeper by the harness, does not (CPython 3.11)


@T.prim_func
def decode(y_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    y = T.match_buffer(y_ptr, (rows, 128), "float32")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    for i, j in T.grid(rows, 128):
        out[i, j] = T.Cast("bfloat16", (y[i, j] - T.float32(1.0)) * T.float32(0.25))


_kernel = tvm.compile(decode, target="llvm")


def _headroom(depth=0):
    try:
        return _headroom(depth + 1)
    except RecursionError:
        return depth


def _deep(frames, encoded, out):
    if frames > 0:
        return _deep(frames - 1, encoded, out)
    _kernel(encoded, out)
    return out


def run(hidden_states, weight):
    x = hidden_states.float()
    answer = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * weight.float()
    encoded = answer * 4.0 + 1.0
    out = torch.empty_like(hidden_states)
    return _deep(max(_headroom() - MARGIN, 0), encoded, out)
