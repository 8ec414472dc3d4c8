"""GroupNorm's normalisation computed eagerly by one operator the cost model does not know:
``aten._batch_norm_with_update`` on the input viewed as [1, batch·groups, rest] normalises each group by its own
statistics (training mode). The result is stored permuted (position i·K mod n), and a TIRx kernel reads it back in
order and applies the affine (two of the eight FLOPs per element): no map lines its operand up with the output. The
unknown operator stood for one of the reference's six passes and counted nothing towards the floor on element work:
the eager code matched 1/6 of the passes and 0% of the necessary FLOPs, and passed every rule. An unknown operator
stands for every pass no larger than a pass over its operands (``Work.unbounded``): all six."""

# expect: decorative_dsl
# problem: p31
import torch
import tvm
from tvm.script import tirx as T

KEY = 1000003  # a prime: i -> i·KEY mod n permutes range(n) for every n it does not divide
GROUPS, EPS = 32, 1e-5


@T.prim_func
def affine(parked_ptr: T.handle, weight_ptr: T.handle, bias_ptr: T.handle, out_ptr: T.handle):
    b, c, s = T.int64(), T.int64(), T.int64()
    parked = T.match_buffer(parked_ptr, (b * c * s,), "float32")
    weight = T.match_buffer(weight_ptr, (c,), "float32")
    bias = T.match_buffer(bias_ptr, (c,), "float32")
    out = T.match_buffer(out_ptr, (b, c, s), "float32")
    for i, j, k in T.grid(b, c, s):
        at = ((i * c + j) * s + k) * T.int64(KEY) % (b * c * s)
        out[i, j, k] = parked[at] * weight[j] + bias[j]


_affine = tvm.compile(affine, target="llvm")
_positions: dict[int, torch.Tensor] = {}


def run(hidden_states: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    b, c = hidden_states.shape[:2]
    n = hidden_states.numel()
    if n not in _positions:
        _positions[n] = (torch.arange(n, dtype=torch.int64) * KEY) % n
    x = hidden_states.float().reshape(1, b * GROUPS, -1)
    statistics = torch.zeros(b * GROUPS), torch.ones(b * GROUPS)
    normed = torch.ops.aten._batch_norm_with_update(x, None, None, *statistics, 0.0, EPS)[0]
    parked = torch.empty(n, dtype=torch.float32)
    parked[_positions[n]] = normed.reshape(-1)
    out = torch.empty_like(hidden_states)
    _affine(parked, weight.float().contiguous(), bias.float().contiguous(), out.view(b, c, -1))
    return out
