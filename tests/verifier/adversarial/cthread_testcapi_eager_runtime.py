"""The whole RMSNorm in eager torch, in a thread C code starts (``_testcapi.call_in_temporary_c_thread``): its
thread state carries no audit mode, the guards' thread-start hook never sees it, and it ends before run() returns;
one TIRx launch multiplies by the weight. Refused at import (red team round 11, F3); the dark-CPU rule of correctness
draws is the second line (``_threads.dark_cpu``)."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import _testcapi

import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


@T.prim_func
def apply_weight(n_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    n = T.match_buffer(n_ptr, (rows, HIDDEN), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i, j in T.grid(rows, HIDDEN):
        out[i, j] = T.Cast("bfloat16", n[i, j] * T.Cast("float32", w[j]))


_apply = tvm.compile(apply_weight, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    box = []

    def work():
        x = hidden_states.float()
        box.append(x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS))

    _testcapi.call_in_temporary_c_thread(work)
    out = torch.empty_like(hidden_states)
    _apply(box[0], weight, out)
    return out
