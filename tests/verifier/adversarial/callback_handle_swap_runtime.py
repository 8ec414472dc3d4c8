"""After the correctness draws (a dispatch mode is active there), moves a TVM FFI function wrapping a
Python callback into its real, counted TIRx function: the same object, called with the same arguments,
now runs eager PyTorch inside what looks like a launch. The vault checks the function's native handle
against the one it registered: nothing is counted, so the timed calls launch no DSL kernel at all."""

# expect: not_dsl
# problem: p36
# static-scan: off
import torch
import tvm
import tvm_ffi
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


@T.prim_func
def scale_rows(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i, j in T.grid(rows, HIDDEN):
        out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv[i] * T.Cast("float32", w[j]))


_fn = tvm.compile(scale_rows, target="llvm")["scale_rows"]
_current: list = []
_swapped: list = []


def _eager(*_args):
    x, inv, w, out = _current
    out.copy_((x.float() * inv[:, None] * w.float()).to(x.dtype))


def run(hidden_states, weight):
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    out = torch.empty_like(hidden_states)
    if torch._C._len_torch_dispatch_stack() == 0 and not _swapped:
        _fn.__move_handle_from__(tvm_ffi.convert(_eager))
        _swapped.append(True)
    _current[:] = [hidden_states, inv_rms, weight, out]
    _fn(hidden_states, inv_rms, weight, out)
    return out
