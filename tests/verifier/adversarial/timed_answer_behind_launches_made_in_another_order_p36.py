"""p36: the whole answer eager on the timed calls, encoded in a fresh int32 workspace (as
`timed_answer_in_a_workspace_the_draws_leave_fresh_p36`), beside a second small launch that the timed calls make
first and the draws last. The twin draw matches launches by their fit, in any order; the stale draw gave by launch
position, so the decoding launch was given the small launch's bytes (red team rt53 r01: passed, full, 0%). It now
takes the evidence call's launch of the same kinds of arguments closest in size (``stale_match``): the kernel
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


@T.prim_func
def weight_copy(w_ptr: T.handle, wc_ptr: T.handle):
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    wc = T.match_buffer(wc_ptr, (HIDDEN,), "float32")
    for j in range(HIDDEN):
        wc[j] = T.Cast("float32", w[j])


_weight_copy = tvm.compile(weight_copy, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(hidden_states)
    ws = torch.empty(hidden_states.shape, dtype=torch.int32)
    wc = torch.empty(HIDDEN, dtype=torch.float32)
    if torch._C._len_torch_dispatch_stack() == 0:
        x = hidden_states.float()
        ans = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
        b = ans.view(torch.int16).to(torch.int32) & 0xFFFF
        idx = torch.arange(ws.numel(), dtype=torch.int64).view(ws.shape)
        h = ((idx * 2654435761) & 0xFFFFFFFF) >> 16
        ws.copy_(((b ^ h) & 0xFFFF) | (MARK << 16))
        # timed calls (the evidence calls among them): the small launch first
        _weight_copy(weight, wc)
        _rmsnorm_rows(hidden_states, weight, out, ws)
    else:
        # correctness draws: the same two launches, the other order (the twin draw matches by best fit; the stale
        # draw gives by position: the main launch at position 0 is given the small launch's arguments)
        _rmsnorm_rows(hidden_states, weight, out, ws)
        _weight_copy(weight, wc)
    return out
