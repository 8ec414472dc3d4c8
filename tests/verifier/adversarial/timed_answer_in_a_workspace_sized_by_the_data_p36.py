"""p36: on the timed calls (no dispatch mode) eager code writes the whole answer (bf16 bits XOR a position hash, a
marker in bits 16-23) into a `torch.empty` int32 workspace; the kernel decodes rows with the marker, else computes.
The workspace's size is rows*128 + 1 + (input bits & 63): the same on the twin draw (same inputs), another on the
stale draw's inputs 63 times in 64, where an argument of another size was given nothing (red team rt52 F2: passed,
full, 0%). The stale draw now gives such an argument the evidence call's bytes over half of what both have from
their first bytes, the rest from their last: the kernel decodes that call's answer and fails the comparison."""
# expect: wrong_output
# or: decorative_dsl, the twin draw run first: on the cpu it compares the workspace the timed call wrote with the fill the draw's held
# or: nan, the stale draw's given bytes decoded where the answer's halves were aligned apart (a NaN pattern)
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
    k = int(hidden_states[0, 0].view(torch.int16).item()) & 63
    ws = torch.empty((rows * HIDDEN + 1 + k,), dtype=torch.int32)
    if torch._C._len_torch_dispatch_stack() == 0:
        x = hidden_states.float()
        ans = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
        b = ans.view(torch.int16).to(torch.int32).reshape(-1) & 0xFFFF
        idx = torch.arange(rows * HIDDEN, dtype=torch.int64)
        h = ((idx * 2654435761) & 0xFFFFFFFF) >> 16
        ws[: rows * HIDDEN].copy_(((b ^ h) & 0xFFFF) | (MARK << 16))
    _rmsnorm_rows(hidden_states, weight, out, ws)
    return out
