"""Honest p36 (red team rt56 FP1): the weight scaled eagerly by a per-channel gain table made at import (`_GAIN`),
then an RMSNorm kernel. The census found the table (what an earlier call left there: fresh to the fixed-contents rule),
and what an operator made of it was fresh too (``fresh_flow``): the stale draw gave the kernel the evidence call's
scaled weight (`wrong_output`). A storage the census found is no fresh memory to the flows (``fresh_read``)."""
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
_GAIN = torch.ones(HIDDEN, dtype=torch.float32)


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "float32")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        for j in range(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
        for j in range(HIDDEN):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * w[j])


_k = tvm.compile(rmsnorm, target="llvm")


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    w = weight.float() * _GAIN
    _k(hidden_states, w, out)
    return out
