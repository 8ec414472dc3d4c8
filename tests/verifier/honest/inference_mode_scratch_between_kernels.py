"""Honest p28 in two kernels under @torch.inference_mode(): the first writes the residual sum into a float32 scratch
the call made (an inference tensor), the second normalises it. The vault updates that scratch in place on the draws
(its sentinel fill, the bypass test's put-back) after run() left the mode: red team rt17 F1 crashed the worker there."""

# problem: p28
import torch
import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

HIDDEN = 4096


@I.ir_module
class Kernels:
    @T.prim_func
    def add(h_ptr: T.handle, r_ptr: T.handle, s_ptr: T.handle):
        rows = T.int32()
        h = T.match_buffer(h_ptr, (rows, 4096), "bfloat16")
        r = T.match_buffer(r_ptr, (rows, 4096), "bfloat16")
        s = T.match_buffer(s_ptr, (rows, 4096), "float32")
        for i, j in T.grid(rows, 4096):
            s[i, j] = T.Cast("float32", h[i, j]) + T.Cast("float32", r[i, j])

    @T.prim_func
    def norm(s_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
        rows = T.int32()
        s = T.match_buffer(s_ptr, (rows, 4096), "float32")
        w = T.match_buffer(w_ptr, (4096,), "bfloat16")
        out = T.match_buffer(out_ptr, (rows, 4096), "bfloat16")
        total = T.alloc_buffer((1,), "float32")
        for i in range(rows):
            total[0] = T.float32(0)
            for j in range(4096):
                total[0] = total[0] + s[i, j] * s[i, j]
            for j in range(4096):
                scale = T.rsqrt(total[0] / T.float32(4096) + T.float32(1e-5))
                out[i, j] = T.Cast("bfloat16", s[i, j] * scale * T.Cast("float32", w[j]))


_built = tvm.compile(Kernels, target="llvm")
_add, _norm = _built["add"], _built["norm"]


@torch.inference_mode()
def run(hidden_states: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    summed = torch.empty(hidden_states.shape, dtype=torch.float32)
    out = torch.empty_like(hidden_states)
    _add(hidden_states, residual, summed)
    _norm(summed, weight, out)
    return out
