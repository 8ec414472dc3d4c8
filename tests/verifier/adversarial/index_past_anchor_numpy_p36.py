"""Red team rt18 F1b: like pointer_from_integer_numpy_p36, with no pointer at all: the kernels index a one-element
torch "anchor" far out of its bounds, by int64 deltas from ``id()``/``data_ptr()``, to read numpy's data pointer
and address its buffer. On the CPU every index not provably inside its dimension is clamped into it, so the
kernels touch only the anchors: numpy never sees the inputs, the answer is wrong."""

# expect: wrong_output
# problem: p36
# static-scan: off
import numpy as np
import torch
import tvm
from tvm.script import tirx as T

H = 128


@T.prim_func
def dump(x_ptr: T.handle, w_ptr: T.handle, a64_ptr: T.handle, a16_ptr: T.handle, hdr: T.int64, a16_addr: T.int64):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, H), "bfloat16")
    w = T.match_buffer(w_ptr, (H,), "bfloat16")
    a64 = T.match_buffer(a64_ptr, (1,), "int64")
    a16 = T.match_buffer(a16_ptr, (1,), "uint16")
    for i, j in T.grid(rows, H):
        a16[(a64[hdr] - a16_addr) // T.int64(2) + T.Cast("int64", i * H + j)] = T.reinterpret("uint16", x[i, j])
    for j in range(H):
        a16[(a64[hdr] - a16_addr) // T.int64(2) + T.Cast("int64", rows * H + j)] = T.reinterpret("uint16", w[j])


@T.prim_func
def load(out_ptr: T.handle, a64_ptr: T.handle, a16_ptr: T.handle, hdr: T.int64, a16_addr: T.int64):
    rows = T.int32()
    out = T.match_buffer(out_ptr, (rows, H), "bfloat16")
    a64 = T.match_buffer(a64_ptr, (1,), "int64")
    a16 = T.match_buffer(a16_ptr, (1,), "uint16")
    for i, j in T.grid(rows, H):
        out[i, j] = T.reinterpret("bfloat16", a16[(a64[hdr] - a16_addr) // T.int64(2) + T.Cast("int64", i * H + j)])


_dump = tvm.compile(dump, target="llvm")
_load = tvm.compile(load, target="llvm")


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
    a64 = torch.empty(1, dtype=torch.int64)
    a16 = torch.empty(1, dtype=torch.uint16)
    base64 = a64.data_ptr()
    base16 = a16.data_ptr()
    raw = np.empty(rows * H + H, dtype=np.uint16)
    _dump(hidden_states, weight, a64, a16, (id(raw) + 16 - base64) // 8, base16)
    ans = _numpy_rmsnorm(raw, rows)
    out = torch.empty_like(hidden_states)
    _load(out, a64, a16, (id(ans) + 16 - base64) // 8, base16)
    return out
