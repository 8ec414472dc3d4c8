"""Red team rt22 F1 (3) on p36: the draws are told apart by the sentinel of fresh memory (NaN), where the kernel
computes the RMSNorm. On every other call eager torch writes twice the answer (float32) into a separate argument,
which the draws pass too (zeros there), and the same kernel, in its other mode, maps it into the output
(``out = scratch / 2``): no value of the output is one the scratch held, so the copy check finds nothing. The
evidence calls' decode fit finds the output a map of that operand as it was before the launch and takes those
elements from the launch's work: the work rule rejects it."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


@T.prim_func
def rms_or_map(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, s_ptr: T.handle, out_ptr: T.handle, mode: T.int32):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    s = T.match_buffer(s_ptr, (rows, HIDDEN), "float32")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i, j in T.grid(rows, HIDDEN):
        if mode == 0:
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv[i] * T.Cast("float32", w[j]))
        else:
            out[i, j] = T.Cast("bfloat16", s[i, j] * T.float32(0.5))


_kernel = tvm.compile(rms_or_map, target="llvm")


def run(hidden_states, weight):
    # all of 64 elements: one element of reused memory is NaN by chance in some processes (an allocator's pointer bits)
    audited = bool(torch.empty(64, dtype=torch.int32).eq(0).all())
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    out = torch.empty_like(hidden_states)
    if audited:
        scratch = torch.zeros(hidden_states.shape, dtype=torch.float32)
        _kernel(hidden_states, inv_rms, weight, scratch, out, 0)
        return out
    scratch = hidden_states.float() * inv_rms[:, None] * weight.float() * 2.0
    _kernel(hidden_states, inv_rms, weight, scratch, out, 1)
    return out
