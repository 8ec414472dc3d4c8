"""RMSNorm computed eagerly with its products and sums written as stores: the squares and the scaling by
``scatter_(..., reduce="multiply")``, the mean's 1/k by ``scatter_`` of a value with ``reduce="multiply"``, the
row sums by ``index_put_(..., accumulate=True)``; a one-element kernel's 1.0 multiplied into the row scales.
Priced by their base names these stores were free data movement (pointwise share 0.004, passes 0.33); they are
element arithmetic, and the eager code does all of the operator's work."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def one(a_ptr: T.handle):
    a = T.match_buffer(a_ptr, (1,), "float32")
    a[0] = T.float32(1)


_one = tvm.compile(one, target="llvm")


def run(hidden_states, weight):
    seed = torch.empty(1, dtype=torch.float32)
    _one(seed)
    rows, k = hidden_states.shape
    x = hidden_states.float()
    every = torch.arange(k).expand(rows, k)
    squares = x.clone().scatter_(1, every, x, reduce="multiply")
    sums = torch.zeros(rows)
    sums.index_put_((torch.arange(rows).repeat_interleave(k),), squares.reshape(-1), accumulate=True)
    sums.scatter_(0, torch.arange(rows), 1.0 / k, reduce="multiply")
    inv = torch.rsqrt(sums + 1e-6) * seed
    y = x.clone().scatter_(1, every, inv[:, None].expand(rows, k).contiguous(), reduce="multiply")
    y.scatter_(1, every, weight.float().expand(rows, k).contiguous(), reduce="multiply")
    return y.to(hidden_states.dtype)
