"""The whole RMSNorm computed eagerly inside torch's own CPU kernel of ``aten::fmax``, replaced through
``torch.library.impl`` (the namespace spelt at run time): below the Python dispatch key its operators are never
reported, and the operator is priced as one pointwise pass; the DSL kernel only scales by the weight
(red team rt15b F1)."""

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


torch.library.impl("".join(("at", "en::fmax")), "CPU")(_normalised)


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _kernel(torch.fmax(hidden_states, weight), weight, out)
    return out
