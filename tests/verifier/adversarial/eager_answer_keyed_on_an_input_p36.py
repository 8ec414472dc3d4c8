"""Red team rt23's F1, made to cost at SMOKE what it costs at PRODUCTION. On a correctness draw (told apart by the
sentinel fresh memory holds there) one TIRx kernel computes RMSNorm, given the input's own bits as its scratch; on
every other call eager torch computes the answer and hands the kernel its bits plus the input's (mod 2^16), which the
kernel takes off again. The input is no eager-made operand, so no decode map recovers the output, and the launch's
signature, footprint, bytes and shares are the draws'. What it cannot hide is the eager answer's time on the scored
calls, which no draw saw (``_judge.scored_host_time``): at PRODUCTION that is ~40 ms of a 46 ms call; at SMOKE one
answer costs less than the rule's floor, so this case makes it ``REPEAT`` times over, as a larger problem would."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
REPEAT = 200


@T.prim_func
def rms_or_key(x_ptr: T.handle, w_ptr: T.handle, s_ptr: T.handle, out_ptr: T.handle, mode: T.int32):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    w = T.match_buffer(w_ptr, (HIDDEN,), "bfloat16")
    s = T.match_buffer(s_ptr, (rows, HIDDEN), "uint16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    acc = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        if mode == 0:
            acc[0] = T.float32(0)
            for j in range(HIDDEN):
                acc[0] = acc[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
            for j in range(HIDDEN):
                inv = T.float32(1) / T.sqrt(acc[0] / T.float32(HIDDEN) + T.float32(EPS))
                out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv * T.Cast("float32", w[j]))
        else:
            for j in range(HIDDEN):
                bits = T.Cast("uint32", s[i, j] - T.reinterpret("uint16", x[i, j]))
                out[i, j] = T.Cast("bfloat16", T.reinterpret("float32", T.shift_left(bits, T.uint32(16))))


_kernel = tvm.compile(rms_or_key, target="llvm")


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    # all of 64 elements: one element of reused memory is NaN by chance in some processes (an allocator's pointer bits)
    if bool(torch.empty(64, dtype=torch.int32).eq(0).all()):
        _kernel(hidden_states, weight, hidden_states.view(torch.uint16), out, 0)
        return out
    for _ in range(REPEAT):
        xf = hidden_states.float()
        y = (xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
    keyed = (y.view(torch.int16) + hidden_states.view(torch.int16)).view(torch.uint16)
    _kernel(hidden_states, weight, keyed, out, 1)
    return out
