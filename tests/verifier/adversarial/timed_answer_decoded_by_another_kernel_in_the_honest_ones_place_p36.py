"""p36 (red team rt55 F2): two compiled kernels of one signature, A an honest RMSNorm and B an in-place decoder of
an answer whose bf16 bits are XORed with a hash of each element's position; rows padded to a tile. The draws launch
A over the padded rows into the output, then B (padded rows, scratch), A (one row), B (one row). The timed calls
(no dispatch mode) compute the whole answer eagerly, encoded into the output, and launch B in A's place, then the same
three: A never computes more than one row there. Launch kinds and the multiset of numbers and layouts agree.

Passed at 0% (a full plan) while the twin draw matched launches by numbers and layouts alone: the draw's A matched the
evidence call's B (the inputs alike, the output fresh). The twin draw compares a launch's kernel too
(``launch_facts``): A over the padded rows has no match on the timed call."""
# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
TILE = 24


@T.prim_func
def rms_a(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in T.serial(rows):
        acc[0] = T.float32(0)
        for j in range(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
        for j in range(HIDDEN):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


@T.prim_func
def rms_b(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i in T.serial(rows):
        for j in range(HIDDEN):
            key = T.Cast("uint32", i * HIDDEN + j) * T.uint32(2654435761)
            h = T.Cast("uint16", T.shift_right(key, T.uint32(16)))
            out[i, j] = T.reinterpret("bfloat16", T.bitwise_xor(T.reinterpret("uint16", out[i, j]), h))


_a = tvm.compile(rms_a, target="llvm")
_b = tvm.compile(rms_b, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    rows = hidden_states.shape[0]
    padded = (rows + TILE - 1) // TILE * TILE + (TILE if rows % TILE == 0 else 0)
    xp = torch.cat([hidden_states, torch.empty((padded - rows, HIDDEN), dtype=hidden_states.dtype)])
    out = torch.empty((padded, HIDDEN), dtype=hidden_states.dtype)
    scratch = torch.empty((1, HIDDEN), dtype=hidden_states.dtype)
    scratch1 = torch.empty((1, HIDDEN), dtype=hidden_states.dtype)
    scratch72 = torch.empty((padded, HIDDEN), dtype=hidden_states.dtype)
    if torch._C._len_torch_dispatch_stack() == 0:
        x = hidden_states.float()
        ans = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
        b = ans.view(torch.int16).to(torch.int32) & 0xFFFF
        idx = torch.arange(rows * HIDDEN, dtype=torch.int64).view(rows, HIDDEN)
        h = ((idx * 2654435761) & 0xFFFFFFFF) >> 16
        out[:rows].view(torch.int16).copy_(((b ^ h) & 0xFFFF).to(torch.int16))
        _b(xp, weight, out)
        _b(xp, weight, scratch72)
        _a(xp[:1], weight, scratch)
        _b(xp[:1], weight, scratch1)
    else:
        _a(xp, weight, out)
        _b(xp, weight, scratch72)
        _a(xp[:1], weight, scratch)
        _b(xp[:1], weight, scratch1)
    return out[:rows]
