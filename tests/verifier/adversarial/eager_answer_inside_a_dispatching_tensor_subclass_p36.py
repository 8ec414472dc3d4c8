"""p36: the whole RMSNorm computed inside a tensor subclass's own ``__torch_dispatch__``. A dispatch mode hands the
operator to the subclass, whose handler runs its own operators on the inner tensors with the mode popped: out of the
vault's sight. Before red team rt62 F0's fix this form failed ``nan`` (the kernel read memory no recorded writer left,
erased); an operator on such a subclass is refused now, at the first one (``_provenance``'s ``subclass_kind``,
``operator_reads``): the draw raises."""
# expect: exception
# problem: p36
import torch
import tvm
from torch.utils._pytree import tree_map
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128


class Hiding(torch.Tensor):
    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=inner.device)

    def __init__(self, inner):
        self.inner = inner

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        unwrap = lambda t: t.inner if isinstance(t, Hiding) else t  # noqa: E731
        return tree_map(lambda t: Hiding(t) if isinstance(t, torch.Tensor) else t,
                        func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {})))


@T.prim_func
def copy_rows(src_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    src = T.match_buffer(src_ptr, (rows, HIDDEN), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i, j in T.grid(rows, HIDDEN):
        out[i, j] = src[i, j]


_copy = tvm.compile(copy_rows, target="llvm")


def run(hidden_states, weight):
    x, w = Hiding(hidden_states.float()), Hiding(weight.float())
    y = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * w).to(torch.bfloat16)
    out = torch.empty_like(hidden_states)
    _copy(y.inner, out)
    return out
