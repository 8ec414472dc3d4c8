"""A variant of red team rt22 F1 on p36, through two launches: on the correctness draws (told apart by the sentinel of
fresh memory, NaN) a first kernel computes the RMSNorm in float32 into a workspace and a second casts it into the
output, an honest pipeline. On every other call eager torch computes ``3 * answer + 0.75`` into a scratch argument
(zeros on the draws), the first kernel, in its other mode, takes the offset off into the workspace and the second
divides by 3 into the output. Each launch is a simple map of what it read; the second's operand is the first's output,
which an honest pipeline's second launch may map (it is masked as a launch's), unless the first launch's work was
itself withdrawn: then it is no launch's, and both launches' work is taken. The work rule rejects it."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import ir as I
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


@I.ir_module
class Kernels:
    @T.prim_func
    def first(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, s_ptr: T.handle, ws_ptr: T.handle, mode: T.int32):
        rows = T.int32()
        x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
        inv = T.match_buffer(inv_ptr, (rows,), "float32")
        w = T.match_buffer(w_ptr, (128,), "bfloat16")
        s = T.match_buffer(s_ptr, (rows, 128), "float32")
        ws = T.match_buffer(ws_ptr, (rows, 128), "float32")
        for i, j in T.grid(rows, 128):
            if mode == 0:
                ws[i, j] = T.Cast("float32", x[i, j]) * inv[i] * T.Cast("float32", w[j])
            else:
                ws[i, j] = s[i, j] - T.float32(0.75)

    @T.prim_func
    def second(ws_ptr: T.handle, out_ptr: T.handle, mode: T.int32):
        rows = T.int32()
        ws = T.match_buffer(ws_ptr, (rows, 128), "float32")
        out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
        for i, j in T.grid(rows, 128):
            if mode == 0:
                out[i, j] = T.Cast("bfloat16", ws[i, j])
            else:
                out[i, j] = T.Cast("bfloat16", ws[i, j] / T.float32(3))


_built = tvm.compile(Kernels, target="llvm")
_first, _second = _built["first"], _built["second"]


def run(hidden_states, weight):
    # all of 64 elements: one element of reused memory is NaN by chance in some processes (an allocator's pointer bits)
    audited = bool(torch.empty(64, dtype=torch.int32).eq(0).all())
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    workspace = torch.empty(hidden_states.shape, dtype=torch.float32)
    out = torch.empty_like(hidden_states)
    if audited:
        scratch = torch.zeros(hidden_states.shape, dtype=torch.float32)
        mode = 0
    else:
        scratch = hidden_states.float() * inv_rms[:, None] * weight.float() * 3.0 + 0.75
        mode = 1
    _first(hidden_states, inv_rms, weight, scratch, workspace, mode)
    _second(workspace, out, mode)
    return out
