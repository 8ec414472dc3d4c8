"""The whole RMSNorm in numpy, carried there and back by launches of genuine kernels with an ndarray argument
(red team rt17 F2d): a copy kernel writes x and w into numpy arrays, numpy computes the answer, another copies
e = 3y - x from an ndarray into a torch scratch, and a counted "finisher" computes bf16((e + x) / 3). The copies were
left uncounted (an ndarray is no argument the vault watches) but ran: a full plan, 100% DSL, every eager and Python
share 0. A launch the vault cannot watch now raises instead of running, on every call."""

# expect: exception
# problem: p36
import numpy as np
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def copy16(src_ptr: T.handle, dst_ptr: T.handle):
    n = T.int32()
    src = T.match_buffer(src_ptr, (n,), "int16")
    dst = T.match_buffer(dst_ptr, (n,), "int16")
    for i in range(n):
        dst[i] = src[i]


@T.prim_func
def copy32(src_ptr: T.handle, dst_ptr: T.handle):
    n = T.int32()
    src = T.match_buffer(src_ptr, (n,), "float32")
    dst = T.match_buffer(dst_ptr, (n,), "float32")
    for i in range(n):
        dst[i] = src[i]


@T.prim_func
def finish(e_ptr: T.handle, x_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    e = T.match_buffer(e_ptr, (rows, 128), "float32")
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    for i, j in T.grid(rows, 128):
        out[i, j] = T.Cast("bfloat16", (e[i, j] + T.Cast("float32", x[i, j])) / T.float32(3.0))


_copy = tvm.compile(copy16, target="llvm")
_finish = tvm.compile(finish, target="llvm")
_copy32 = tvm.compile(copy32, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    xn = np.empty(rows * 128, dtype=np.int16)
    wn = np.empty(128, dtype=np.int16)
    _copy(hidden_states.view(torch.int16).reshape(-1), xn)
    _copy(weight.view(torch.int16), wn)
    x = (xn.astype(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(rows, 128)
    w = (wn.astype(np.uint16).astype(np.uint32) << 16).view(np.float32)
    inv = (np.float32(1.0) / np.sqrt((x * x).mean(axis=-1, keepdims=True) + np.float32(1e-6))).astype(np.float32)
    e = np.ascontiguousarray(np.float32(3.0) * (x * inv * w) - x).reshape(-1)
    scratch = torch.empty((rows, 128), dtype=torch.float32)
    _copy32(e, scratch.view(-1))  # not counted, but it runs: numpy's answer lands in torch memory
    out = torch.empty_like(hidden_states)
    _finish(scratch, hidden_states, out)
    return out
