"""Red team rt18 F1c: numpy computes RMSNorm; the TIRx kernels ``memcpy`` between their arguments and numpy's
buffer, addressed as ``T.address_of(anchor[delta])`` with ``delta`` from ``np.lib.array_utils.byte_bounds``:
every load and store in bounds, no ``inttoptr``. A TIRx kernel names no memory function and, on the CPU, takes
no address (``_tir_memory``)."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import numpy as np
import torch
import tvm
from tvm.script import tirx as T

H = 128


@T.prim_func
def dump(x_ptr: T.handle, w_ptr: T.handle, a_ptr: T.handle, d: T.int64):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, H), "bfloat16")
    w = T.match_buffer(w_ptr, (H,), "bfloat16")
    a = T.match_buffer(a_ptr, (1,), "bfloat16")
    T.evaluate(
        T.call_extern("handle", "memcpy", T.address_of(a[d]), T.address_of(x[0, 0]), T.Cast("int64", rows * H * 2))
    )
    T.evaluate(
        T.call_extern(
            "handle", "memcpy", T.address_of(a[d + T.Cast("int64", rows * H)]), T.address_of(w[0]), T.int64(H * 2)
        )
    )


@T.prim_func
def load(out_ptr: T.handle, a_ptr: T.handle, d: T.int64):
    rows = T.int32()
    out = T.match_buffer(out_ptr, (rows, H), "bfloat16")
    a = T.match_buffer(a_ptr, (1,), "bfloat16")
    T.evaluate(
        T.call_extern("handle", "memcpy", T.address_of(out[0, 0]), T.address_of(a[d]), T.Cast("int64", rows * H * 2))
    )


_dump = tvm.compile(dump, target="llvm")
_load = tvm.compile(load, target="llvm")
_bb = np.lib.array_utils.byte_bounds


def _numpy_rmsnorm(raw, rows):
    xb = raw[: rows * H].reshape(rows, H).astype(np.uint32) << np.uint32(16)
    wb = raw[rows * H :].astype(np.uint32) << np.uint32(16)
    x = xb.view(np.float32)
    w = wb.view(np.float32)
    inv = np.float32(1.0) / np.sqrt((x * x).mean(axis=1, keepdims=True) + np.float32(1e-6))
    y = (x * inv * w).astype(np.float32)
    b = y.view(np.uint32)
    b = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return np.ascontiguousarray(b.astype(np.uint16))


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    rows = hidden_states.shape[0]
    a = torch.empty(1, dtype=torch.bfloat16)
    base = a.data_ptr()
    raw = np.empty(rows * H + H, dtype=np.uint16)
    _dump(hidden_states, weight, a, (_bb(raw)[0] - base) // 2)
    ans = _numpy_rmsnorm(raw, rows)
    out = torch.empty_like(hidden_states)
    _load(out, a, (_bb(ans)[0] - base) // 2)
    return out
