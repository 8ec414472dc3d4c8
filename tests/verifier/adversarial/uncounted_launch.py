"""Calls the compiled kernel through TVM's raw FFI function, around the launch counter (static scan off: it
refuses ``_ffi_api`` and ``get_global_func``; the guards refuse ``get_global_func`` to the submission, so the
raw function is taken from ``_ffi_api``): an uncounted kernel is no DSL. Since session 50 its call is refused first:
a TVM FFI function other than a counted launch handed tensors (``_guards._ffi_tensor_call``)."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import torch
import tvm
import tvm_ffi
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

_raw = tvm_ffi.module._ffi_api.ModuleGetFunction(_kernel.mod, "rmsnorm", True)


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _raw(hidden_states, weight, out)
    return out
