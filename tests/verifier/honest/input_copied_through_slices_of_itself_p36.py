"""Honest: the whole RMSNorm in one TIRx kernel, the input first copied by a Python loop of 1024 eight-element slices
of itself, joined by one ``cat``. Views at offsets Python gives count as values from Python (``_eagerwork.OFFSET``,
red team rt67: an eager answer put back as one-element slices of a table); a view of a problem input brings the input's
data, not Python's, and is left out: counted, these 1024 would be 50% of the answer's bytes, past the 25% rule."""
# problem: p36
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    w = T.match_buffer(w_ptr, (128,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        for j in range(128):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        scale = T.rsqrt(acc[0] / T.float32(128) + T.float32(1e-6))
        for j in range(128):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_kernel = tvm.compile(rmsnorm, target="llvm")


def run(hidden_states, weight):
    flat = hidden_states.reshape(-1)
    copied = torch.cat([flat[i : i + 8] for i in range(0, flat.numel(), 8)]).view(hidden_states.shape)
    out = torch.empty_like(hidden_states)
    _kernel(copied, weight, out)
    return out
