"""p36 (red team rt60 F0): on every call a first kernel writes a workspace whole; on every call but the draws, eager
code then writes the whole answer (its bits XOR a position hash) and a flag over that workspace, and the second kernel
decodes it where the flag is set. Passed 2 of 2 as a full plan while the twin draw left out of its comparison every
byte an earlier launch of the draw changed: on the draw the workspace was the first kernel's. Now only bytes an
earlier launch left on both calls are left out (``_provenance.twin_compared``, ``left_by_launches``): on the evidence
call the eager code wrote them, so they are compared (``decorative_dsl``)."""
# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
MAGIC = 0x5A5A5A5
CHEAT = True


@T.prim_func
def squares(x_ptr: T.handle, s_ptr: T.handle):
    rows = T.int32()
    srows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    s = T.match_buffer(s_ptr, (srows, HIDDEN), "float32")
    for i in range(rows):
        for j in range(HIDDEN):
            s[i, j] = T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
    for j in range(HIDDEN):
        s[rows, j] = T.float32(0)


@T.prim_func
def finish(x_ptr: T.handle, w_ptr: T.handle, s_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    srows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    s = T.match_buffer(s_ptr, (srows, HIDDEN), "int32")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        if s[rows, 0] == MAGIC:
            for j in range(HIDDEN):
                key = T.Cast("uint32", i * HIDDEN + j) * T.uint32(2654435761)
                h = T.Cast("int32", T.shift_right(key, T.uint32(16)))
                b = T.bitwise_and(T.bitwise_xor(s[i, j], h), 65535)
                out[i, j] = T.reinterpret("bfloat16", T.Cast("uint16", b))
        else:
            acc[0] = T.float32(0)
            for j in range(HIDDEN):
                acc[0] = acc[0] + T.reinterpret("float32", s[i, j])
            scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
            for j in range(HIDDEN):
                out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_squares = tvm.compile(squares, target="llvm")
_finish = tvm.compile(finish, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    s = torch.empty((rows + 1, HIDDEN), dtype=torch.float32)
    out = torch.empty_like(hidden_states)
    _squares(hidden_states, s)
    si = s.view(torch.int32)
    if CHEAT and torch._C._len_torch_dispatch_stack() == 0:
        x = hidden_states.float()
        ans = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
        b = ans.view(torch.int16).to(torch.int32) & 0xFFFF
        idx = torch.arange(rows * HIDDEN, dtype=torch.int64).view(rows, HIDDEN)
        si[:rows].copy_(b ^ (((idx * 2654435761) & 0xFFFFFFFF) >> 16))
        si[rows, 0] = MAGIC
    _finish(hidden_states, weight, si, out)
    return out
