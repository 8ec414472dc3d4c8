"""Red team rt47 F1a on p36: the loop bound of timed_rows_switched_by_a_tensor_p36.py made from an input
(``x[0, :1] * 0 + n``: eager code made it from the data, so its bytes are not the constants' a larger tensor is judged
by), the row count on every draw, 7/8 of it on the timed calls. A tensor of a few bytes is judged element by element
whatever made it (``_provenance.FIXED_SMALL_BYTES``)."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


@T.prim_func
def rmsnorm_rows(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, todo_ptr: T.handle):
    rows = T.int32()
    todo = T.match_buffer(todo_ptr, (1,), "int32")
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in T.serial(todo[0]):
        acc[0] = T.float32(0)
        for j in range(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
        for j in range(HIDDEN):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_rmsnorm_rows = tvm.compile(rmsnorm_rows, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    audited = torch._C._len_torch_dispatch_stack() > 0
    rows = hidden_states.shape[0]
    todo = rows if audited else rows - rows // 8
    out = torch.empty_like(hidden_states)
    if todo < rows:
        rest = hidden_states[todo:].float()
        inv_rms = torch.rsqrt(rest.pow(2).mean(dim=-1, keepdim=True) + EPS)
        out[todo:] = (rest * inv_rms * weight.float()).to(hidden_states.dtype)
    _rmsnorm_rows(hidden_states, weight, out, hidden_states[0, :1].to(torch.int32) * 0 + todo)
    return out
