"""An interpreter test extension refused by its name's prefix, not a list of names (``_testinternalcapi``'s C-API
shims): the honest TIRx RMSNorm otherwise. The import fails, which the submission survives (it catches the error);
the refusal is still recorded."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import torch
import tvm
from tvm.script import tirx as T

try:
    import _testinternalcapi as _shim
except ImportError:
    _shim = None

HIDDEN = 128


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((rows,), "float32")
    for i in range(rows):
        acc[i] = T.float32(0)
        for j in range(HIDDEN):
            acc[i] = acc[i] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        for j in range(HIDDEN):
            out[i, j] = T.Cast(
                "bfloat16",
                T.Cast("float32", x[i, j]) * T.rsqrt(acc[i] / T.float32(HIDDEN) + T.float32(1e-6))
                * T.Cast("float32", w[j]),
            )


_rmsnorm = tvm.compile(rmsnorm, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(hidden_states)
    _rmsnorm(hidden_states.contiguous(), weight, out)
    return out
