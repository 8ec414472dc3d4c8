"""Red team rt18 F1: RMSNorm computed in numpy; the TIRx kernels only move bytes to and from numpy's buffer through
a pointer made from an integer (``T.reinterpret`` of ``id(array) + 16``: the array's data field, then its data).
The built kernels reach memory no argument covers; a TIRx kernel makes no pointer (``_tir_memory``)."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import numpy as np
import torch
import tvm
from tvm.script import tirx as T

H = 128
_P64 = tvm.ir.PointerType(tvm.ir.PrimType("int64"))
_P16 = tvm.ir.PointerType(tvm.ir.PrimType("uint16"))


@T.prim_func
def dump(x_ptr: T.handle, w_ptr: T.handle, obj: T.int64):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, H), "bfloat16")
    w = T.match_buffer(w_ptr, (H,), "bfloat16")
    hp: T.let[T.handle("int64")] = T.reinterpret(_P64, obj + T.int64(16))
    hb = T.decl_buffer((1,), "int64", data=hp)
    dp: T.let[T.handle("uint16")] = T.reinterpret(_P16, hb[0])
    d = T.decl_buffer((rows * H + H,), "uint16", data=dp)
    for i, j in T.grid(rows, H):
        d[i * H + j] = T.reinterpret("uint16", x[i, j])
    for j in range(H):
        d[rows * H + j] = T.reinterpret("uint16", w[j])


@T.prim_func
def load(out_ptr: T.handle, obj: T.int64):
    rows = T.int32()
    out = T.match_buffer(out_ptr, (rows, H), "bfloat16")
    hp: T.let[T.handle("int64")] = T.reinterpret(_P64, obj + T.int64(16))
    hb = T.decl_buffer((1,), "int64", data=hp)
    sp: T.let[T.handle("uint16")] = T.reinterpret(_P16, hb[0])
    s = T.decl_buffer((rows * H,), "uint16", data=sp)
    for i, j in T.grid(rows, H):
        out[i, j] = T.reinterpret("bfloat16", s[i * H + j])


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
    raw = np.empty(rows * H + H, dtype=np.uint16)
    _dump(hidden_states, weight, id(raw))
    ans = _numpy_rmsnorm(raw, rows)
    out = torch.empty_like(hidden_states)
    _load(out, id(ans))
    return out
