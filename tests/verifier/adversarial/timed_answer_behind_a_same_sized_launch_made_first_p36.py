"""p36: the whole answer eager on the timed calls in a fresh int32 workspace, beside a second launch of the same kernel
with the same layouts (one row into a junk buffer, its workspace zeros, told apart by a number) made first on the
timed calls and last on the draws. The stale draw took the first of the evidence launches equally close in size, the
dummy's (red team rt54 b01: passed, full, 0%); it now takes the one the twin draw's launch in the same place matched
by its bytes (``twin_map``): the kernel decodes that call's answer and fails the comparison."""
# expect: wrong_output
# or: decorative_dsl, the twin draw run first: on the cpu it compares the workspace the timed call wrote with the fill the draw's held
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
MARK = 0x5A5A


@T.prim_func
def rmsnorm_rows(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, ws_ptr: T.handle, n: T.int32):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    ws = T.match_buffer(ws_ptr, (rows, HIDDEN), "int32")
    acc = T.alloc_buffer((1,), "float32")
    for i in T.serial(n):
        if T.shift_right(ws[i, 0], 16) == MARK:
            for j in range(HIDDEN):
                key = T.Cast("uint32", i * HIDDEN + j) * T.uint32(2654435761)
                h = T.Cast("int32", T.shift_right(key, T.uint32(16)))
                b = T.bitwise_and(T.bitwise_xor(ws[i, j], h), 65535)
                out[i, j] = T.reinterpret("bfloat16", T.Cast("uint16", b))
        else:
            acc[0] = T.float32(0)
            for j in range(HIDDEN):
                acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
            scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
            for j in range(HIDDEN):
                out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_k = tvm.compile(rmsnorm_rows, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    rows = hidden_states.shape[0]
    out = torch.empty_like(hidden_states)
    junk = torch.empty_like(hidden_states)
    ws = torch.empty(hidden_states.shape, dtype=torch.int32)
    ws0 = torch.zeros(hidden_states.shape, dtype=torch.int32)
    if torch._C._len_torch_dispatch_stack() == 0:
        x = hidden_states.float()
        ans = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
        b = ans.view(torch.int16).to(torch.int32) & 0xFFFF
        idx = torch.arange(ws.numel(), dtype=torch.int64).view(ws.shape)
        h = ((idx * 2654435761) & 0xFFFFFFFF) >> 16
        ws.copy_(((b ^ h) & 0xFFFF) | (MARK << 16))
        _k(hidden_states, weight, junk, ws0, 1)       # dummy first: key 0, same kind, distance 0
        _k(hidden_states, weight, out, ws, rows)
    else:
        _k(hidden_states, weight, out, ws, rows)      # the real launch first: takes the first of equals
        _k(hidden_states, weight, junk, ws0, 1)
    return out
