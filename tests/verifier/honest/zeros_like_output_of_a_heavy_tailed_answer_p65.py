"""Honest p65 (Mamba2 intra-chunk diagonal): TIRx kernel 1 computes C_t . B_s per group (s <= t) into a float32
scratch, TIRx kernel 2 accumulates the decayed, dt-scaled x over the chunk per (token, head) and writes bf16 into an
output the eager code allocated with torch.zeros (as many wrappers do). Red team rt40's FP1: with its launches
suppressed the zeros were "correct" within the allowance on 69% of the heavy-tailed output (max ~107), and it was
rejected as decorative; the bypass test judges only the elements a zero gets wrong now (``test_coverage.py``)."""

# problem: p65
# thorough: ~60 s on two cores: p65's naive chunk loops at SMOKE
import torch
import tvm
from tvm.script import tirx as T

CH = 128
H = 128
P = 80
G = 8
N = 128


@T.prim_func
def cb_k(b_h: T.handle, c_h: T.handle, o_h: T.handle):
    L = T.int32()
    Bm = T.match_buffer(b_h, (L, G, N), "bfloat16")
    Cm = T.match_buffer(c_h, (L, G, N), "bfloat16")
    cb = T.match_buffer(o_h, (G, L, CH), "float32")
    acc = T.alloc_buffer((1,), "float32")
    for g, t, j in T.grid(G, L, CH):
        if j <= t % CH:
            acc[0] = T.float32(0.0)
            for n in range(N):
                acc[0] = acc[0] + T.Cast("float32", Cm[t, g, n]) * T.Cast("float32", Bm[(t // CH) * CH + j, g, n])
            cb[g, t, j] = acc[0]


@T.prim_func
def y_k(x_h: T.handle, dt_h: T.handle, a_h: T.handle, cb_h: T.handle, y_h: T.handle):
    L = T.int32()
    x = T.match_buffer(x_h, (L, H, P), "bfloat16")
    dt = T.match_buffer(dt_h, (L, H), "float32")
    A = T.match_buffer(a_h, (H,), "float32")
    cb = T.match_buffer(cb_h, (G, L, CH), "float32")
    y = T.match_buffer(y_h, (L, H, P), "bfloat16")
    acc = T.alloc_buffer((P,), "float32")
    st = T.alloc_buffer((2,), "float32")
    for t, h in T.grid(L, H):
        for p in range(P):
            acc[p] = T.float32(0.0)
        st[0] = T.float32(0.0)  # sum_{s<m<=t} dt_m A
        for jj in range(t % CH + 1):
            st[1] = cb[h // (H // G), t, t % CH - jj] * T.exp(st[0]) * dt[t - jj, h]
            for p in range(P):
                acc[p] = acc[p] + st[1] * T.Cast("float32", x[t - jj, h, p])
            st[0] = st[0] + dt[t - jj, h] * A[h]
        for p in range(P):
            y[t, h, p] = T.Cast("bfloat16", acc[p])


_cb = tvm.compile(cb_k, target="llvm")
_y = tvm.compile(y_k, target="llvm")


def run(x, dt, A, B, C):
    b, L, _, _ = x.shape
    y = torch.zeros_like(x)
    cb = torch.empty((G, L, CH), dtype=torch.float32)
    for i in range(b):
        _cb(B[i].contiguous(), C[i].contiguous(), cb)
        _y(x[i].contiguous(), dt[i].contiguous(), A.contiguous(), cb, y[i])
    return y
