"""Honest: the whole RMSNorm in one TIRx kernel, with numpy as a helper the way honest code uses it (red team rt13's
``v5_numpy_import``: imported, a constant through ``np.float32``; ``np.prod`` of a shape, ``np.log2``, ``np.array``
of a torch.Size, a small host-side table built with numpy and handed over with ``torch.from_numpy``): numpy is the
submission's to use, only its ways to raw memory are refused (verifier README, step 2)."""

# problem: p36
import numpy as np
import torch
import tvm
from tvm.script import tirx as T

EPS32 = float(np.float32(1e-6))
HIDDEN = 128
#: 1/HIDDEN, the mean's divisor, as a one-element table the kernel reads
_INV_COLS = torch.from_numpy(np.array([1.0 / HIDDEN], dtype=np.float32))


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, inv_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    inv = T.match_buffer(inv_ptr, (1,), "float32")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        for j in range(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        scale = T.rsqrt(acc[0] * inv[0] + T.float32(EPS32))
        for j in range(HIDDEN):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_kernel = tvm.compile(rmsnorm, target="llvm")


def run(hidden_states, weight):
    shape = np.array(hidden_states.shape)  # a torch.Size converted by numpy in the timed call
    assert int(np.prod(shape)) == hidden_states.numel() and 2 ** int(np.log2(shape[-1])) == HIDDEN
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, _INV_COLS, out)
    return out
