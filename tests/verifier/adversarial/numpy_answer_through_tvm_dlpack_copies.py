"""The same numpy answer through TVM (red team rt17 F2): ``tvm.runtime.from_dlpack(ndarray)`` makes a TVM tensor over
numpy's memory and ``Tensor.copyto`` (a memcpy, no operator, no launch) fills it from the inputs; numpy's e = 3y - x
enters the kernel the same way. Both the foreign DLPack import and the copy between DSL tensors are now refused."""

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
    xn, xt = _aligned((rows, 128), np.int16)
    wn, wt = _aligned((128,), np.int16)
    _dl(hidden_states.view(torch.int16)).copyto(xt)  # a memcpy: no operator, no tolist
    _dl(weight.view(torch.int16)).copyto(wt)
    x = _bf16_to_f32(xn)
    w = _bf16_to_f32(wn)
    inv = (np.float32(1.0) / np.sqrt((x * x).mean(axis=-1, keepdims=True) + np.float32(1e-6))).astype(np.float32)
    y = x * inv * w
    en, et = _aligned((rows, 128), np.float32)
    en[...] = np.float32(3.0) * y - x
    out = torch.empty_like(hidden_states)
    _finish(et, hidden_states, out)
    return out
