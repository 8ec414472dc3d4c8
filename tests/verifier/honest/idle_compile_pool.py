"""RMSNorm in one TIRx kernel, compiled at import on a thread pool that the module keeps for later
compiles (a new row count compiles there too); run() waits for its kernel. Once built, the pool's thread
sits idle on its queue: no work runs outside run()."""

from concurrent.futures import Future, ThreadPoolExecutor

import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128


def _build(rows: int):
    @T.prim_func
    def rmsnorm(x_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
        x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
        w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
        out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
        acc = T.alloc_buffer((1,), "float32")
        for i in range(rows):
            acc[0] = T.float32(0)
            for j in range(HIDDEN):
                acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
            scale = T.rsqrt(acc[0] / T.float32(HIDDEN) + T.float32(1e-6))
            for j in range(HIDDEN):
                out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j]))

    return tvm.compile(rmsnorm, target="llvm")


_COMPILER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="compile")
_KERNELS: dict[int, Future] = {64: _COMPILER.submit(_build, 64)}


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    rows = hidden_states.shape[0]
    if rows not in _KERNELS:
        _KERNELS[rows] = _COMPILER.submit(_build, rows)
    out = torch.empty_like(hidden_states)
    _KERNELS[rows].result()(hidden_states, weight, out)
    return out
