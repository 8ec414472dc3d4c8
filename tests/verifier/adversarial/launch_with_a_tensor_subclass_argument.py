"""An honest RMSNorm kernel whose constant gain is a Tensor subclass of the submission's (its Python may run
where the launch converts it): the launch does not run, and the gate's error names the argument's type (red team
rt15b FP1: the feedback said only that no kernel was launched; until rt17 F2d the launch ran uncounted)."""

# expect: exception
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128


class Gain(torch.Tensor):
    pass


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, g_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    gain = T.match_buffer(g_ptr, (HIDDEN,), "float32")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in T.serial(rows):
        acc[0] = T.float32(0)
        for j in T.serial(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        acc[0] = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(1e-6))
        for j in T.serial(HIDDEN):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * acc[0] * T.Cast("float32", w[j]) * gain[j])


_kernel = tvm.compile(rmsnorm, target="llvm")
_gain = torch.ones(HIDDEN).as_subclass(Gain)


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states.view(-1, HIDDEN), weight, _gain, out.view(-1, HIDDEN))
    return out
