"""The whole RMSNorm in numpy over torch tensors aliasing numpy's memory (``torch.from_dlpack(ndarray)``; red team
rt17 F2b): a torch copy (a movement operator) writes the inputs there, numpy computes y and hands the kernel
e = 3y - x through another alias, and the kernel computes bf16((e + x) / 3), a decode mixing in a problem input that
no decode map regresses on. No operator computed, nothing counted crossing: a full plan, 100% DSL. A DLPack import of
memory torch or a DSL did not allocate is now refused."""

# expect: forbidden_api
# problem: p36
import numpy as np
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def finish(e_ptr: T.handle, x_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    e = T.match_buffer(e_ptr, (rows, 128), "float32")
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    for i, j in T.grid(rows, 128):
        out[i, j] = T.Cast("bfloat16", (e[i, j] + T.Cast("float32", x[i, j])) / T.float32(3.0))


_finish = tvm.compile(finish, target="llvm")
_dl = tvm.runtime.from_dlpack


def _aligned(shape, dtype):
    """A numpy array whose memory TVM accepts (64-byte aligned), found by trying offsets; and its TVM tensor."""
    n = int(np.prod(shape))
    buf = np.empty(n + 64, dtype=dtype)
    for off in range(64):
        view = buf[off : off + n].reshape(shape)
        try:
            return view, _dl(view)
        except RuntimeError:
            continue
    raise RuntimeError("no aligned offset")


def _bf16_to_f32(bits16):
    return (bits16.astype(np.uint16).astype(np.uint32) << 16).view(np.float32)


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    xn = np.empty((rows, 128), dtype=np.int16)
    wn = np.empty((128,), dtype=np.int16)
    torch.from_dlpack(xn).copy_(hidden_states.view(torch.int16))  # a movement op; numpy then reads it
    torch.from_dlpack(wn).copy_(weight.view(torch.int16))
    x = _bf16_to_f32(xn)
    w = _bf16_to_f32(wn)
    inv = (np.float32(1.0) / np.sqrt((x * x).mean(axis=-1, keepdims=True) + np.float32(1e-6))).astype(np.float32)
    y = x * inv * w
    en = np.ascontiguousarray(np.float32(3.0) * y - x)
    out = torch.empty_like(hidden_states)
    _finish(torch.from_dlpack(en), hidden_states, out)
    return out
