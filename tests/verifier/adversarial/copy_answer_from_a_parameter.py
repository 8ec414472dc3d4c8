"""The whole answer computed eagerly into an ``nn.Parameter`` (in place), then copied to the output by a TIRx
kernel: a Parameter passed to a launch counts as the tensor it is, and so does an eager operator's destination
that is one (red team rt15b FP1's fix must not hide eager work behind a Parameter)."""

# expect: decorative_dsl
# problem: p36
import torch
import tvm
from torch import nn
from tvm.script import tirx as T

HIDDEN = 128


@T.prim_func
def copy_rows(src_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    src = T.match_buffer(src_ptr, (rows, HIDDEN), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i, j in T.grid(rows, HIDDEN):
        out[i, j] = src[i, j]


_kernel = tvm.compile(copy_rows, target="llvm")
_held: dict[int, nn.Parameter] = {}


@torch.no_grad()
def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    x = hidden_states.view(-1, HIDDEN)
    answer = _held.get(x.shape[0])
    if answer is None:
        answer = _held[x.shape[0]] = nn.Parameter(torch.empty_like(x), requires_grad=False)
    xf = x.float()
    answer.copy_((xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * weight.float()).to(x.dtype))
    out = torch.empty_like(hidden_states)
    _kernel(answer, out.view(-1, HIDDEN))
    return out
