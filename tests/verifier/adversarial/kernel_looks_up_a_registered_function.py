"""Host code that reaches a function of the process by name, with no runtime symbol and no ``call_packed``
spelling: ``tvm_call_packed`` built from strings makes the host module look the name up through the loader's
pointers (the lookup from the module's imports falls back to every registered function), here TVM's own
``ffi.ModuleLoadFromFile``, which loads a native library of any origin inside the launch (a Python callback
the same way, were registering one not refused). A host module may look up only its own device kernels: the
build is refused, naming the function."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128
_lookup = getattr(tvm.tirx, "call_" + "intrin")(
    "int32", "tirx.tvm_" + "call_" + "packed", "ffi.ModuleLoad" + "FromFile", "libanswer.so"
)


@T.prim_func
def load_native(out_ptr: T.handle):
    rows = T.int32()
    T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    T.evaluate(_lookup)


_kernel = tvm.compile(load_native, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(hidden_states)
    _kernel(out)
    return out
