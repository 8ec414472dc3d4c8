"""rt13 F1 for half the output: on timed calls the kernel copies the eager answer's first half of the rows (its
argument holds only those) and computes the other half; the draws' launches compute all of it."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128
PAD = 200000  # busy iterations: the timed launches' DSL time above the rule's share of the draws'


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, ans_ptr: T.handle, mode: T.int32, reps: T.int32):
    rows = T.int32()
    half_rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    ans = T.match_buffer(ans_ptr, (half_rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    if mode == 0:
        for i in range(rows):
            acc[0] = T.float32(0)
            for k in range(HIDDEN):
                acc[0] = acc[0] + T.Cast("float32", x[i, k]) * T.Cast("float32", x[i, k])
            for j in range(HIDDEN):
                out[i, j] = T.Cast(
                    "bfloat16",
                    T.Cast("float32", x[i, j])
                    * T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(1e-6))
                    * T.Cast("float32", w[j]),
                )
    else:
        for i, j in T.grid(half_rows, HIDDEN):
            out[i, j] = ans[i, j]
        for i in range(half_rows, rows):
            acc[0] = T.float32(0)
            for k in range(HIDDEN):
                acc[0] = acc[0] + T.Cast("float32", x[i, k]) * T.Cast("float32", x[i, k])
            for j in range(HIDDEN):
                out[i, j] = T.Cast(
                    "bfloat16",
                    T.Cast("float32", x[i, j])
                    * T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(1e-6))
                    * T.Cast("float32", w[j]),
                )
        acc[0] = T.float32(1)
        for r in range(reps):
            acc[0] = acc[0] * T.float32(1.0000001) + T.Cast("float32", x[r % rows, r % HIDDEN]) * T.float32(1e-30)
        if acc[0] == T.float32(-12345.0):
            out[0, 0] = T.Cast("bfloat16", acc[0])


_k = tvm.compile(rmsnorm, target="llvm")


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    half = hidden_states.shape[0] // 2
    if bool(torch.empty(8, dtype=torch.int32).eq(0).all()):  # a correctness draw: fresh memory holds the sentinel
        _k(hidden_states, weight, out, torch.empty_like(hidden_states[:half]), 0, 0)
        return out
    x = hidden_states[:half].float()
    ans = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()).to(hidden_states.dtype)
    _k(hidden_states, weight, out, ans, 1, PAD // 2)
    return out
