"""p36: as `timed_answer_in_a_workspace_the_draws_leave_fresh_p36`, the workspace a float32 `torch.empty` whose
elements the timed calls set to the encoded answer as exact integers; the kernel is handed `ws.to(torch.int32)`. On a
draw the cast of the sentinel (NaN) is INT_MIN, neither sentinel the stale draw knew by value (red team rt52 F1:
passed, full, 0%). What a cast made of fresh memory is fresh (``fresh_flow``), given by the tracking: the kernel
decodes the evidence call's answer and fails the comparison."""
# expect: wrong_output
# or: decorative_dsl, the twin draw run first: on the cpu it compares the workspace the timed call wrote with the fill the draw's held
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
MARK = 0x5A


@T.prim_func
def rmsnorm_rows(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, ws_ptr: T.handle):
    rows = T.int32()
    n = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    ws = T.match_buffer(ws_ptr, (n,), "int32")
    acc = T.alloc_buffer((1,), "float32")
    for i in T.serial(rows):
        if T.shift_right(ws[i * HIDDEN], 16) == MARK:
            for j in range(HIDDEN):
                key = T.Cast("uint32", i * HIDDEN + j) * T.uint32(2654435761)
                h = T.Cast("int32", T.shift_right(key, T.uint32(16)))
                b = T.bitwise_and(T.bitwise_xor(ws[i * HIDDEN + j], h), 65535)
                out[i, j] = T.reinterpret("bfloat16", T.Cast("uint16", b))
        else:
            acc[0] = T.float32(0)
            for j in range(HIDDEN):
                acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
            scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
            for j in range(HIDDEN):
                out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_rmsnorm_rows = tvm.compile(rmsnorm_rows, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    rows = hidden_states.shape[0]
    out = torch.empty_like(hidden_states)
    ws = torch.empty((rows * HIDDEN,), dtype=torch.float32)
    if torch._C._len_torch_dispatch_stack() == 0:
        x = hidden_states.float()
        ans = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
        b = ans.view(torch.int16).to(torch.int32).reshape(-1) & 0xFFFF
        idx = torch.arange(rows * HIDDEN, dtype=torch.int64)
        h = ((idx * 2654435761) & 0xFFFFFFFF) >> 16
        ws.copy_((((b ^ h) & 0xFFFF) | (MARK << 16)).float())
    _rmsnorm_rows(hidden_states, weight, out, ws.to(torch.int32))
    return out
