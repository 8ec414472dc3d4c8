"""Red team rt22 F1 (2) on p36: the draws are told apart by the sentinel of fresh memory (NaN), where the kernel
computes the RMSNorm into the first half of a buffer of twice the output's rows. On every other call eager torch
writes the answer into the buffer's second half and the same kernel, in its other mode, copies it into the first
half, which run() returns: every byte of the output changed by the launch, every element left by it, and the copy
check (``launch_copies``) looks only at the launch's other arguments. The evidence calls' decode fit takes the
written argument's own contents as they were before the launch (its other half) among its operands: the copy is
an identity map of a moved run, taken from the launch's work, and the work rule rejects it."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


@T.prim_func
def rms_or_copy(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, buf_ptr: T.handle, mode: T.int32):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    buf = T.match_buffer(buf_ptr, (2 * rows, HIDDEN), "bfloat16")
    for i, j in T.grid(rows, HIDDEN):
        if mode == 0:
            buf[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv[i] * T.Cast("float32", w[j]))
        else:
            buf[i, j] = buf[i + rows, j]


_kernel = tvm.compile(rms_or_copy, target="llvm")


def run(hidden_states, weight):
    # all of 64 elements: one element of reused memory is NaN by chance in some processes (an allocator's pointer bits)
    audited = bool(torch.empty(64, dtype=torch.int32).eq(0).all())
    rows = hidden_states.shape[0]
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + EPS)
    buf = torch.empty((2 * rows, HIDDEN), dtype=hidden_states.dtype)
    if audited:
        _kernel(hidden_states, inv_rms, weight, buf, 0)
        return buf[:rows]
    buf[rows:] = (hidden_states.float() * inv_rms[:, None] * weight.float()).to(hidden_states.dtype)
    _kernel(hidden_states, inv_rms, weight, buf, 1)
    return buf[:rows]
