"""A TIRx kernel that computes nothing: its host code calls back into the submission's Python through TVM's FFI
(``T.call_extern`` of ``TVMFFIFunctionCall`` on a callable the submission converted with ``tvm_ffi.convert``
and passed as a kernel argument), and the callback computes the answer into the output inside the launch's
window (red team rt15b F4). Host code calls no TVM runtime function by name but its error report: the build is
refused, naming the symbol."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import torch
import tvm
import tvm_ffi
from tvm.script import tirx as T

HIDDEN = 128


@T.prim_func
def call_back(out_ptr: T.handle, callback: T.handle):
    rows = T.int32()
    T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    result = T.alloc_buffer((2,), "int64")
    result[0] = T.int64(0)
    T.evaluate(
        T.call_extern(
            "int32", "TVMFFIFunctionCall", callback, T.reinterpret("handle", T.uint64(0)), 0, T.address_of(result[0])
        )
    )


_kernel = tvm.compile(call_back, target="llvm")
_pending: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []


def _answer() -> None:
    x, w, out = _pending.pop()
    xf = x.float()
    out.copy_((xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * w.float()).to(out.dtype))


_callback = tvm_ffi.convert(_answer)


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(hidden_states)
    _pending.append((hidden_states, weight, out))
    _kernel(out, _callback)
    return out
