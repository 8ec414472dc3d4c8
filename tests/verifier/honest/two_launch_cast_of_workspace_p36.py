"""Honest p36 in two kernels: the first computes each row's RMSNorm in float32 into a workspace, the second casts the
workspace into the bfloat16 output. The second launch is a simple map (a cast) of what it reads, which the decode rule
judges on the evidence calls too (red team rt22 F1): there the workspace is the first launch's output, left as it
wrote it, and is masked as the DSL's own (as on the correctness draws, where it is the DSL's by provenance), so the
second launch keeps its work."""

# problem: p36
import torch
import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

HIDDEN = 128


@I.ir_module
class Kernels:
    @T.prim_func
    def norm(x_ptr: T.handle, w_ptr: T.handle, ws_ptr: T.handle):
        rows = T.int32()
        x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
        w = T.match_buffer(w_ptr, (128,), "bfloat16")
        ws = T.match_buffer(ws_ptr, (rows, 128), "float32")
        acc = T.alloc_buffer((1,), "float32")
        for i in range(rows):
            acc[0] = T.float32(0)
            for j in range(128):
                acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
            scale = T.rsqrt(acc[0] / T.float32(128) + T.float32(1e-6))
            for j in range(128):
                ws[i, j] = T.Cast("float32", x[i, j]) * scale * T.Cast("float32", w[j])

    @T.prim_func
    def cast(ws_ptr: T.handle, out_ptr: T.handle):
        rows = T.int32()
        ws = T.match_buffer(ws_ptr, (rows, 128), "float32")
        out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
        for i, j in T.grid(rows, 128):
            out[i, j] = T.Cast("bfloat16", ws[i, j])


_built = tvm.compile(Kernels, target="llvm")
_norm, _cast = _built["norm"], _built["cast"]


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    workspace = torch.empty(hidden_states.shape, dtype=torch.float32)
    out = torch.empty_like(hidden_states)
    _norm(hidden_states, weight, workspace)
    _cast(workspace, out)
    return out
