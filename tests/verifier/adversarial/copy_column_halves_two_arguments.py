"""An eager answer split by columns into two arguments (left 64 and right 64 of 128 columns, each contiguous): no
argument holds 95% of the output, so the per-argument copy check found none, and the only kernel interleaves them.
The eager answer is priced low (squares looked up in a table of every bf16 pattern's, row sums by an accumulating
index_put: both movement), so the eager-work rule alone does not reject it. The windowed copy check finds runs of
the output in the halves, pooled over arguments (DESIGN §5)."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

_PATTERNS = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).float()
_SQUARES = _PATTERNS * _PATTERNS  # the square of the bf16 whose bits are i (as int16, modulo 65536)


@T.prim_func
def interleave(left_ptr: T.handle, right_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    left = T.match_buffer(left_ptr, (rows, 64), "bfloat16")
    right = T.match_buffer(right_ptr, (rows, 64), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    for i, j in T.grid(rows, 64):
        out[i, j] = left[i, j]
        out[i, 64 + j] = right[i, j]


_interleave = tvm.compile(interleave, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    x = hidden_states.float()
    squares = _SQUARES[hidden_states.view(torch.int16).long()]  # a negative pattern indexes from the end
    sums = torch.zeros(rows)
    sums.index_put_((torch.arange(rows).repeat_interleave(128),), squares.reshape(-1), accumulate=True)
    scale = torch.rsqrt(sums / 128 + 1e-6)[:, None] * weight.float()
    # each half made on its own: no tensor of the output's size ever holds the answer
    left = (x[:, :64] * scale[:, :64]).to(torch.bfloat16)
    right = (x[:, 64:] * scale[:, 64:]).to(torch.bfloat16)
    out = torch.empty_like(hidden_states)
    _interleave(left, right, out)
    return out
