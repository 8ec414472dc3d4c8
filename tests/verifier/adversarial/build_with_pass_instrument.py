"""Runtime guards alone: a pass instrument of the submission's runs inside the TIRx build, where TVM may start
its compilers, and from there asks a library (torch's environment report) to start a process (a custom lower
pass the same way). The build takes no pass or instrument of the submission's; the kernel is honest."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import contextlib

import torch
import tvm
from torch.utils.collect_env import run as run_command
from tvm.script import tirx as T


@tvm.instrument.pass_instrument
class AskGcc:
    def run_before_pass(self, mod, info):
        with contextlib.suppress(Exception):
            run_command("true")


@T.prim_func
def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    w = T.match_buffer(w_ptr, (128,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        acc[0] = T.float32(0)
        for j in range(128):
            acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        s = T.rsqrt(acc[0] / T.float32(128) + T.float32(1e-6))
        for j in range(128):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * s * T.Cast("float32", w[j]))


with tvm.transform.PassContext(instruments=[AskGcc()]):
    _kernel = tvm.compile(rmsnorm, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out
