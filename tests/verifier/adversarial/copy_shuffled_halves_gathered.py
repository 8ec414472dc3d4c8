"""An eager answer shuffled element by element (a permutation fixed per row count) and split into two arguments: no
argument holds 95% of the output, and no two neighbours of the output are neighbours in either, so neither the
per-argument copy check nor the windowed one found it; the only kernel gathers each element back by its index. The
eager answer is priced low (squares looked up in a table of every bf16 pattern's, row sums by an accumulating
index_put: both movement), so the eager-work rule alone does not reject it. The order-free check finds the output's
values, with their multiplicity, among the two halves' elements pooled (DESIGN §5)."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T

_PATTERNS = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).float()
_SQUARES = _PATTERNS * _PATTERNS  # the square of the bf16 whose bits are i (as int16, modulo 65536)
_ORDERS: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}


@T.prim_func
def gather(first_ptr: T.handle, second_ptr: T.handle, index_ptr: T.handle, out_ptr: T.handle):
    half = T.int32()
    rows = T.int32()
    first = T.match_buffer(first_ptr, (half,), "float32")
    second = T.match_buffer(second_ptr, (half,), "float32")
    index = T.match_buffer(index_ptr, (rows, 128), "int32")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    for i, j in T.grid(rows, 128):
        k = index[i, j]
        out[i, j] = T.Cast("bfloat16", T.if_then_else(k < half, first[T.min(k, half - 1)], second[T.max(k - half, 0)]))


_gather = tvm.compile(gather, target="llvm")


def _order(n):
    """A shuffle of n elements fixed per size, and where each output element went."""
    if n not in _ORDERS:
        order = torch.randperm(n, generator=torch.Generator().manual_seed(n))
        _ORDERS[n] = order, torch.argsort(order).to(torch.int32)
    return _ORDERS[n]


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    x = hidden_states.float()
    squares = _SQUARES[hidden_states.view(torch.int16).long()]  # a negative pattern indexes from the end
    sums = torch.zeros(rows)
    sums.index_put_((torch.arange(rows).repeat_interleave(128),), squares.reshape(-1), accumulate=True)
    scale = torch.rsqrt(sums / 128 + 1e-6)[:, None] * weight.float()
    order, back = _order(rows * 128)
    # each half computed on its own, in the shuffled order: no tensor ever holds the answer in the output's order
    xs, scales = x.reshape(-1)[order], scale.reshape(-1)[order]
    half = rows * 64
    first, second = xs[:half] * scales[:half], xs[half:] * scales[half:]
    out = torch.empty_like(hidden_states)
    _gather(first, second, back.reshape(rows, 128), out)
    return out
