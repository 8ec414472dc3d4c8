"""p36: one TIRx builder, two modules of the same TIR but one integer literal, a mode: built with 0 the kernel computes
the RMSNorm, built with 1 it leaves the output as it finds it. The draws (torch's dispatch stack in use) launch the mode
0 module; the timed calls write the answer eagerly and launch the mode 1 module over it.

A kernel is named by its TIR up to the sizes of its buffers (``_tir_identity``: a kernel built per row count is one
kernel): a literal that is no size of a buffer keeps the two modules two kernels, and the timed calls do not launch
the draws' (`decorative_dsl`)."""
# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


def build(mode: int):
    @T.prim_func
    def rmsnorm_rows(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
        rows = T.int32()
        x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
        w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
        out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
        acc = T.alloc_buffer((1,), "float32")
        for i in T.serial(rows):
            if T.int32(mode) == T.int32(0):
                acc[0] = T.float32(0)
                for j in range(HIDDEN):
                    acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
                scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
                for j in range(HIDDEN):
                    out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))

    return tvm.compile(rmsnorm_rows, target="llvm")


_computing, _passing = build(0), build(1)


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    if torch._C._len_torch_dispatch_stack() == 0:
        x = hidden_states.float()
        out = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
        _passing(hidden_states, weight, out)
        return out
    out = torch.empty_like(hidden_states)
    _computing(hidden_states, weight, out)
    return out
