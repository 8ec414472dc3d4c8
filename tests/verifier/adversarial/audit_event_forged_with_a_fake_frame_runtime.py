"""`sys.audit("sys._getframe", fake)`: the guards look along a `sys._getframe` event's frame for the harness's frames
(`opens_vault`), reading its `f_code`; a fake frame whose `f_code` is a property ran the submission's code inside the
guards' vault, where no event of its thread is judged (the vault's own are not): it imported ctypes there (raw memory,
native code), and could read the vault's and the hook's frames. Refused at the event: the interpreter raises it with a
frame, only a hand-made one carries anything else."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import sys

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


_smuggled: list = []


class _FakeFrame:
    f_back = None

    @property
    def f_code(self):
        import ctypes  # inside the guards' vault: no event of this thread is judged there

        _smuggled.append(ctypes)
        return (lambda: None).__code__


sys.audit("sys._getframe", _FakeFrame())
_raw = _smuggled[0].c_char.from_address  # raw memory: what the hack was for


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, weight, out)
    return out
