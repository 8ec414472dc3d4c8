"""p36 (red team rt55 F4): `adversarial/timed_answer_in_a_workspace_the_draws_leave_fresh_p36` (the timed calls'
whole answer eager, encoded into a fresh int32 workspace with a marker in its high bits; the kernel decodes where the
marker is) with, before the real launch, a number of one-row launches of the same kernel that the data sets
(`x[0, 0]`'s bits & 7). The twin draw repeats the number (the same inputs) and compares nothing fresh; the stale draw,
on inputs of its own, makes another number of them 7 times in 8.

Passed at 0% (a full plan) 7 times in 8 while the stale draw matched launches by their place (the real launch was given
a one-row launch's bytes, or none) and each evidence launch once (a one-row launch past the evidence call's count took
the real one's). It matches by elements first (``stale_match``): the real launch is given the timed call's workspace,
decodes that call's answer and fails the comparison."""
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
def rmsnorm_rows(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, ws_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    ws = T.match_buffer(ws_ptr, (rows, HIDDEN), "int32")
    acc = T.alloc_buffer((1,), "float32")
    for i in T.serial(rows):
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


_rmsnorm_rows = tvm.compile(rmsnorm_rows, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(hidden_states)
    ws = torch.empty(hidden_states.shape, dtype=torch.int32)
    timed = torch._C._len_torch_dispatch_stack() == 0
    k = int(hidden_states.view(torch.int16)[0, 0].item()) & 7
    for _ in range(k):  # "row-tile warm-up" launches, data-dependent count
        so = torch.empty((1, HIDDEN), dtype=hidden_states.dtype)
        sw = torch.empty((1, HIDDEN), dtype=torch.int32)
        if timed:
            sw.zero_()
        _rmsnorm_rows(hidden_states[:1], weight, so, sw)
    if timed:
        x = hidden_states.float()
        ans = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
        b = ans.view(torch.int16).to(torch.int32) & 0xFFFF
        idx = torch.arange(ws.numel(), dtype=torch.int64).view(ws.shape)
        h = ((idx * 2654435761) & 0xFFFFFFFF) >> 16
        ws.copy_(((b ^ h) & 0xFFFF) | (MARK << 16))
    _rmsnorm_rows(hidden_states, weight, out, ws)
    return out
