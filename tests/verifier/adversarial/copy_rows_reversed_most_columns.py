"""One padded argument holds 7/8 of an eager answer with each row stored last element first; its other 16 columns
the kernel computes itself from the inputs. Below 95% held, the per-argument copy check found none, and the windowed
check read the argument's runs forwards only, so it found none either; the order-free check cannot judge a partial
copy of bf16 values at this size (the answer's neighbouring bit patterns are about as common as its own). Windows
are now looked up reversed too (DESIGN §5). The eager answer is priced low as in
copy_most_columns_kernel_computes_rest."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

_PATTERNS = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).float()
_SQUARES = _PATTERNS * _PATTERNS  # the square of the bf16 whose bits are i (as int16, modulo 65536)


@T.prim_func
def finish(x_ptr: T.handle, w_ptr: T.handle, held_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    padded = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    w = T.match_buffer(w_ptr, (128,), "bfloat16")
    held = T.match_buffer(held_ptr, (padded, 128), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    total = T.alloc_buffer((1,), "float32")
    for i in range(rows):
        total[0] = T.float32(0)
        for j in range(128):
            total[0] = total[0] + T.Cast("float32", x[i, j]) * T.Cast("float32", x[i, j])
        for j in range(112):
            out[i, j] = held[i + 1, 127 - j]
        for j in range(16):
            out[i, 112 + j] = T.Cast(
                "bfloat16",
                T.Cast("float32", x[i, 112 + j])
                * T.rsqrt(total[0] / T.float32(128) + T.float32(1e-6))
                * T.Cast("float32", w[112 + j]),
            )


_finish = tvm.compile(finish, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    x = hidden_states.float()
    squares = _SQUARES[hidden_states.view(torch.int16).long()]  # a negative pattern indexes from the end
    sums = torch.zeros(rows)
    sums.index_put_((torch.arange(rows).repeat_interleave(128),), squares.reshape(-1), accumulate=True)
    scale = torch.rsqrt(sums / 128 + 1e-6)[:, None] * weight.float()
    held = torch.zeros(rows + 1, 128, dtype=torch.bfloat16)
    held[1:, 16:] = (x[:, :112] * scale[:, :112]).to(torch.bfloat16).flip(1)
    out = torch.empty_like(hidden_states)
    _finish(hidden_states, weight, held, out)
    return out
