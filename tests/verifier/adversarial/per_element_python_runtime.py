"""Each row's inverse RMS and the normalised values computed in Python one element at a time through
``Tensor.map2_``/``apply_`` (reached by a name built at run time): C++ loops calling a Python callable per element
run no operator and cross no value where the audit counts; the DSL kernel only scales by the weight
(red team rt15b F6)."""

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
_EACH = getattr(torch.Tensor, "".join(("ap", "ply_")))


def run(hidden_states, weight):
    y = hidden_states.float()
    squares = y.clone()
    _EACH(squares, lambda v: v * v)
    inv = torch.rsqrt(squares.mean(dim=-1, keepdim=True) + 1e-6)
    out = torch.empty_like(hidden_states)
    _kernel(y * inv, weight, out)
    return out
