"""A variant of red team rt22 F1 on p36: the correctness draws are told apart by the sentinel of fresh memory (NaN),
where the kernel computes the RMSNorm. On every other call eager torch writes the answer's bit patterns XORed with a
constant key into the output, and the same kernel, in its other mode, XORs them back in place: every byte changed by
the launch, every element left by it, no value another argument held. The evidence calls' decode fit finds the output
a bit map (XOR a constant) of its own contents before the launch and takes those elements from the launch's work:
the work rule rejects it."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
KEY = 0x2D5B


@T.prim_func
def rms_or_unxor(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle, mode: T.int32):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i, j in T.grid(rows, HIDDEN):
        if mode == 0:
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv[i] * T.Cast("float32", w[j]))
        else:
            out[i, j] = T.reinterpret("bfloat16", T.bitwise_xor(T.reinterpret("int16", out[i, j]), T.int16(KEY)))


_kernel = tvm.compile(rms_or_unxor, target="llvm")


def run(hidden_states, weight):
    # all of 64 elements: one element of reused memory is NaN by chance in some processes (an allocator's pointer bits)
    audited = bool(torch.empty(64, dtype=torch.int32).eq(0).all())
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    if audited:
        out = torch.empty_like(hidden_states)
        _kernel(hidden_states, inv_rms, weight, out, 0)
        return out
    answer = (hidden_states.float() * inv_rms[:, None] * weight.float()).to(hidden_states.dtype)
    out = (answer.view(torch.int16) ^ KEY).view(hidden_states.dtype)
    _kernel(hidden_states, inv_rms, weight, out, 1)
    return out
