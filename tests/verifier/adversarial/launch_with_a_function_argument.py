"""An honest RMSNorm kernel that also takes a TVM FFI function made from the submission's Python (it could be
called back, or its handle walked, by native code): a launch with a function, module or other object among its
arguments does not run: the gate raises, naming the argument (red team rt15b F4: ``tvm_ffi.Function`` was a
plain argument; until rt17 F2d such a launch ran uncounted)."""

# expect: exception
# problem: p36
import torch
import tvm
import tvm_ffi
from tvm.script import tirx as T

HIDDEN = 128


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, callback: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    # a tensor parameter: a raw pointer one is refused at the build (rt18 F1), the gate must see the launch
    T.match_buffer(callback, (1,), "float32")
    acc = T.alloc_buffer((1,), "float32")
    for i in T.serial(rows):
        acc[0] = T.float32(0)
        for j in T.serial(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        acc[0] = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(1e-6))
        for j in T.serial(HIDDEN):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * acc[0] * T.Cast("float32", w[j]))


_kernel = tvm.compile(rmsnorm, target="llvm")
_callback = tvm_ffi.Array([lambda: 0])[0]  # a Python callable made a TVM FFI function by any conversion


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out, _callback)
    return out
