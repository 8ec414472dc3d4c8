"""p36: on the timed calls (no dispatch mode) eager code writes every row of the answer, its bf16 bits XOR a hash of
each element's position, into an int32 `torch.empty` workspace, and a marker into a fresh int32 switch per row; every
call hands the kernel the workspace and a product of the switch (`(switch.unsqueeze(-1) @ one).squeeze(-1)`, `one` a
1x1 matrix of one: a copy), and the kernel decodes a row whose switch holds the marker, else computes it. The draws'
switch holds the integer sentinel (0).

What a contraction made of fresh memory is fresh (``fresh_products``, as a reduction's is, for an honest row
reduction over a padded buffer): out of the twin draw's comparison, which rejected it before. The stale draw gives the
kernel the bytes a timed call's launch found there, the switch's and the workspace's: it decodes that call's answer
and fails the comparison."""
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
def rmsnorm_rows(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, ws_ptr: T.handle, sw_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    wsi = T.match_buffer(ws_ptr, (rows, HIDDEN), "int32")
    sw = T.match_buffer(sw_ptr, (rows,), "int32")
    acc = T.alloc_buffer((1,), "float32")
    for i in T.serial(rows):
        if sw[i] == MARK:
            for j in range(HIDDEN):
                key = T.Cast("uint32", i * HIDDEN + j) * T.uint32(2654435761)
                h = T.Cast("int32", T.shift_right(key, T.uint32(16)))
                b = T.bitwise_and(T.bitwise_xor(wsi[i, j], h), 65535)
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
    switch = torch.empty(hidden_states.shape[:1], dtype=torch.int32)
    if torch._C._len_torch_dispatch_stack() == 0:
        x = hidden_states.float()
        ans = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
        b = ans.view(torch.int16).to(torch.int32) & 0xFFFF
        idx = torch.arange(ws.numel(), dtype=torch.int64).view(ws.shape)
        h = ((idx * 2654435761) & 0xFFFFFFFF) >> 16
        ws.copy_(((b ^ h) & 0xFFFF).to(torch.int32))
        switch.fill_(MARK)
    one = torch.ones((1, 1), dtype=torch.int32)
    _rmsnorm_rows(hidden_states, weight, out, ws, (switch.unsqueeze(-1) @ one).squeeze(-1))
    return out
