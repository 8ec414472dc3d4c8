"""An eager RMSNorm hidden in ``aten::fmin``'s CPU kernel, registered through a library on the catch-all namespace
``_`` (which may name any operator), and the verifier's own searches blinded the same way: ``aten::searchsorted``
answering zeros (red team rt15b F2: the decode and copy checks search and fit with torch's operators)."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def scale(y_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    y = T.match_buffer(y_ptr, (rows, 128), "float32")
    w = T.match_buffer(w_ptr, (128,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    for i, j in T.grid(rows, 128):
        out[i, j] = T.Cast("bfloat16", y[i, j] * T.Cast("float32", w[j]))


_kernel = tvm.compile(scale, target="llvm")


def _normalised(x, other):
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + 1e-6)


def _blind(sorted_sequence, values, **kwargs):
    return torch.zeros(values.shape, dtype=torch.int64)


_library = torch.library.Library("_", "IMPL")
_library.impl("aten::fmin", _normalised, "CPU")
_library.impl("aten::searchsorted.Tensor", _blind, "CPU")


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _kernel(torch.fmin(hidden_states, weight), weight, out)
    return out
