"""p36: the whole answer eager on the timed calls. A small prep kernel writes each int32 workspace word's low byte
from the input and leaves its high bytes as they were (zero, the draws' sentinel); the timed calls put a marker and
the encoded answer in the high bytes. The twin draw left the high bytes out as fresh, byte by byte, and the stale
draw gave only elements fresh whole (red team rt54 b02: passed, full, 0%). The twin draw now compares an element whole
where any of its bytes was written: the high bytes differ."""
# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
MARK = 0x5A


@T.prim_func
def prep(x_ptr: T.handle, ws_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "int16")
    ws = T.match_buffer(ws_ptr, (rows, HIDDEN), "int32")
    for i, j in T.grid(rows, HIDDEN):
        ws[i, j] = T.bitwise_or(T.bitwise_and(T.Cast("int32", x[i, j]), 0xFE), 1)


@T.prim_func
def rmsnorm_rows(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, ws_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    ws = T.match_buffer(ws_ptr, (rows, HIDDEN), "int32")
    acc = T.alloc_buffer((1,), "float32")
    for i in T.serial(rows):
        if T.bitwise_and(T.shift_right(ws[i, 0], 8), 255) == MARK:
            for j in range(HIDDEN):
                key = T.Cast("uint32", i * HIDDEN + j) * T.uint32(2654435761)
                h = T.Cast("int32", T.shift_right(key, T.uint32(16)))
                b = T.bitwise_and(T.bitwise_xor(T.shift_right(ws[i, j], 16), h), 65535)
                out[i, j] = T.reinterpret("bfloat16", T.Cast("uint16", b))
        else:
            acc[0] = T.float32(0)
            for j in range(HIDDEN):
                acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
            scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
            for j in range(HIDDEN):
                out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_prep = tvm.compile(prep, target="llvm")
_k = tvm.compile(rmsnorm_rows, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(hidden_states)
    ws = torch.empty(hidden_states.shape, dtype=torch.int32)
    _prep(hidden_states.view(torch.int16), ws)
    if torch._C._len_torch_dispatch_stack() == 0:
        x = hidden_states.float()
        ans = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
        b = ans.view(torch.int16).to(torch.int32) & 0xFFFF
        idx = torch.arange(ws.numel(), dtype=torch.int64).view(ws.shape)
        h = ((idx * 2654435761) & 0xFFFFFFFF) >> 16
        ws.bitwise_or_((((b ^ h) & 0xFFFF) << 16).to(torch.int32) | (MARK << 8))
    _k(hidden_states, weight, out, ws)
    return out
