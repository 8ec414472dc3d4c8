"""Host code that calls an address it is given, with no symbol at all: LLVM's ``patchpoint`` intrinsic is a call
of any address (here the C function behind a TVM FFI function made from the submission's Python, passed by
value as an integer). LLVM intrinsics are allowed by family (arithmetic, bits, memory, hints), none of which
calls code: the build is refused, naming the intrinsic."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128


@T.prim_func
def call_address(out_ptr: T.handle, address: T.int64):
    rows = T.int32()
    T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    T.evaluate(
        T.call_llvm_intrin(
            "int64",
            "llvm.experimental.patchpoint.i64",
            T.int64(1),
            T.int32(15),
            T.reinterpret("handle", address),
            T.int32(0),
        )
    )


_kernel = tvm.compile(call_address, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(hidden_states)
    _kernel(out, 0)  # an address of the submission's choosing (0 here: the build is what is judged)
    return out
