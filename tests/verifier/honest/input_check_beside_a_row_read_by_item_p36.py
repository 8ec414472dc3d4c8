"""Honest (red team rt67 FP0): ``input_check_beside_a_row_read_into_python_p36`` with the row's values read one
``item()`` at a time: 64 single values, the check's among them past ``CHECKS``, all data, the isfinite pass priced
(``decorative_dsl``, 125% of the pointwise work). Single values read from one storage are that storage's elements, not
checks; the check's, the only one read from its storage, stays one."""
# problem: p36
import math

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
    rows = int(hidden_states.shape[0])
    if not torch.isfinite(hidden_states).all():  # input check (rt58 FP0: no work on the answer)
        raise ValueError("non-finite input")
    total = weight.float().sum().item()  # one routing-style total read back
    firsts = [hidden_states[i, 0].item() for i in range(rows)]  # one value per row, one at a time
    if not math.isfinite(total) or any(math.isnan(v) for v in firsts):
        raise ValueError("non-finite input")
    sizes = torch.tensor([rows, hidden_states.shape[1]], dtype=torch.int64)
    out = torch.empty(tuple(sizes.tolist()), dtype=hidden_states.dtype)
    _kernel(hidden_states, weight, out)
    return out
