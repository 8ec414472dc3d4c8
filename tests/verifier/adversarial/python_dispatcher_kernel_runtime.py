"""An eager RMSNorm as a Python kernel of ``aten::fmax`` keyed by the CPU dispatch key (``py_impl``), which torch
runs once the Python dispatcher is on: below the verifier's dispatch mode, unseen op by op."""

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


@torch.ops.aten.fmax.default.py_impl(torch._C.DispatchKey.CPU)
def _normalised(x, other):
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + 1e-6)


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    with torch._C._EnablePythonDispatcher():
        normalised = torch.fmax(hidden_states, weight)
    _kernel(normalised, weight, out)
    return out
