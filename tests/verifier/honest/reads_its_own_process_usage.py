"""Honest: the whole RMSNorm in one TIRx kernel, with a helper that reads the process's own resource use as
library-like code does (its resident memory in ``/proc/self/status``, its pages in ``/proc/self/statm``, this
thread's ``/proc/thread-self/stat``, its limits, by str and bytes paths): ``/proc/self`` resolves to the worker's
pid, which the rule knows as its own (verifier README, "Guards")."""

# problem: p36
import torch
import tvm
from tvm.script import tirx as T


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
        scale = T.rsqrt(acc[0] / T.float32(128) + T.float32(1e-6))
        for j in range(128):
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))


_kernel = tvm.compile(rmsnorm, target="llvm")


def _resident_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def _usage() -> tuple[int, int, bytes, str]:
    with open("/proc/self/statm") as statm, open(b"/proc/thread-self/stat", "rb") as stat:
        pages, thread = int(statm.read().split()[1]), stat.read()
    with open("/proc/self/limits") as limits:
        return _resident_kib(), pages, thread, limits.read()


_AT_IMPORT = _usage()


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    assert _usage()[0] > 0
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out
