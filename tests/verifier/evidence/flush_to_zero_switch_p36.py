"""p36 (red team rt55 F1's switch): the timed calls (no dispatch mode) turn flush-to-zero on before the launch
(`torch.set_flush_denormal(True)`), and the kernel probes it with a product that is subnormal (`w[0] * 1e-30 *
1e-10`): where it reads 0 it only decodes its output in place (rt55's eager answer, left out here: the output holds
zeros), else it computes. Every launch on the cpu runs with flush-to-zero off (the vault sets the launching thread's
floating-point state): the kernel computes on every call and the verdict passes. With the switch reaching the
kernel, every timed call's output would be zeros (`wrong_output`, the re-checked timed calls)."""
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


@T.prim_func
def rmsnorm_rows(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in T.serial(rows):
        probe = T.Cast("float32", w[0]) * T.float32(1e-30) * T.float32(1e-10)
        if probe == T.float32(0):
            for j in range(HIDDEN):
                key = T.Cast("uint32", i * HIDDEN + j) * T.uint32(2654435761)
                h = T.Cast("uint16", T.shift_right(key, T.uint32(16)))
                out[i, j] = T.reinterpret("bfloat16", T.bitwise_xor(T.reinterpret("uint16", out[i, j]), h))
        else:
            acc[0] = T.float32(0)
            for j in range(HIDDEN):
                acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
            scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
            for j in range(HIDDEN):
                out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_rmsnorm_rows = tvm.compile(rmsnorm_rows, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(hidden_states)
    timed = torch._C._len_torch_dispatch_stack() == 0
    if timed:  # the kernel, finding its probe 0, would only "decode" the zeros
        torch.set_flush_denormal(True)
    _rmsnorm_rows(hidden_states, weight, out)
    if timed:
        torch.set_flush_denormal(False)
    return out
