"""RMSNorm as a ``torch.nn.Module`` whose constant per-channel gain (all ones: a model's folded scale) is an
``nn.Parameter(requires_grad=False)`` passed to the one TIRx kernel with the input and the weight: a Parameter
is read as the tensor it is (red team rt15b FP1: the launch was uncounted, ``not_dsl``)."""

import torch
import tvm
from torch import nn
from tvm.script import tirx as T

HIDDEN = 128


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


class RMSNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gain = nn.Parameter(torch.ones(HIDDEN), requires_grad=False)
        self.kernel = tvm.compile(rmsnorm, target="llvm")

    @torch.no_grad()
    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        self.kernel(x.view(-1, HIDDEN), w, self.gain, out.view(-1, HIDDEN))
        return out


_norm = RMSNorm().eval()


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return _norm(hidden_states, weight)
