"""The canary gate of ``canary_gate.py`` inside a PyTorch custom operator (``torch.library.custom_op``):
the eager answer and the one-element canary kernel run within the operator, hidden from a dispatch mode
that would see the operator only as one eager call."""

# expect: decorative_dsl
# or: nan, what the custom operator returns is memory no recorded writer left, erased before it is read
# problem: p36
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def set_flag(flag_ptr: T.handle):
    flag = T.match_buffer(flag_ptr, (1,), "float32")
    flag[0] = T.float32(1)


_flag = tvm.compile(set_flag, target="llvm")


@torch.library.custom_op("canary_in_custom_op::rmsnorm", mutates_args=())
def _gated(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    inv = torch.rsqrt(x.float().pow(2).mean(dim=-1, keepdim=True) + 1e-6)
    answer = (x.float() * inv * w.float()).to(x.dtype)
    flag = torch.empty(1, dtype=torch.float32)
    _flag(flag)
    return answer if flag.item() == 1.0 else torch.zeros_like(x)


def run(hidden_states, weight):
    return _gated(hidden_states, weight)
