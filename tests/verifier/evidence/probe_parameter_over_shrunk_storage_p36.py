"""Red team rt22 F3's probe, made to tell: a launch whose argument is an nn.Parameter over a storage shrunk under it
(``torch._C.StorageBase.resize_``, the static scan off) must be refused on every call alike. Refused only where the
vault watches (the draws, the evidence calls), it told those calls apart from the scored ones (rt22 passed at
production with eager scored calls). Here a probe that runs raises, so the verification fails unless every call
refused it; the real kernel then runs on every call."""

import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


@T.prim_func
def first_byte(far: T.Buffer((32,), "uint8"), out: T.Buffer((1,), "uint8")):
    out[0] = far[0]  # reads inside the 16 bytes left: the probe is harmless, only whether it runs matters


@T.prim_func
def scale_rows(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i, j in T.grid(rows, HIDDEN):
        out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv[i] * T.Cast("float32", w[j]))


_first_byte = tvm.compile(first_byte, target="llvm")
_scale_rows = tvm.compile(scale_rows, target="llvm")
_resize = torch._C.StorageBase.resize_


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    # 32 elements over 16 bytes: past its storage by little (a view over 64 KiB of the heap beyond a 16-byte storage
    # made this check's verdict depend on where the allocator put the call's other tensors, 1 run in 4-6 under load)
    scratch = torch.zeros(32, dtype=torch.uint8)
    probe = torch.nn.Parameter(scratch[:], requires_grad=False)
    _resize(scratch.untyped_storage(), 16)  # the Parameter: 32 elements over 16 bytes
    try:
        _first_byte(probe, torch.empty(1, dtype=torch.uint8))
    except PermissionError:
        pass  # refused: what every call must see
    else:
        raise RuntimeError("a launch over a storage shrunk under its Parameter ran")
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    out = torch.empty_like(hidden_states)
    _scale_rows(hidden_states, inv_rms, weight, out)
    return out
