"""Honest, the host-time twin of ``adversarial/eager_answer_keyed_on_an_input_p36.py``: the same eager cost (an
input staged through ``REPEAT`` float32 round trips before the kernel reads it, wasteful but the same on every call,
the correctness draws included) and a TIRx RMSNorm over the staged input. The scored calls' host work is what the
draws' eager operators took (``_judge.scored_host_time``)."""

# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
REPEAT = 200


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        for j in range(HIDDEN):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        for j in range(HIDDEN):
            inv = T.float32(1) / T.sqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv * T.Cast("float32", w[j]))


_kernel = tvm.compile(rmsnorm, target="llvm")


def run(hidden_states, weight):
    staged = hidden_states
    for _ in range(REPEAT):
        staged = staged.float().to(torch.bfloat16)
    out = torch.empty_like(hidden_states)
    _kernel(staged, weight, out)
    return out
