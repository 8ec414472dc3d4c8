"""Gates an eager answer with a canary and computes that answer with every torch dispatch mode popped,
so that the harness's provenance mode never sees it. The module-level alias of the stack's pop is refused
to the submission's own calls at run time (before, the answer returned, which no launch wrote, failed the
bypass test: DESIGN §5)."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import torch
import tvm
from torch.utils._python_dispatch import _disable_current_modes
from tvm.script import tirx as T


@T.prim_func
def set_flag(flag_ptr: T.handle):
    flag = T.match_buffer(flag_ptr, (1,), "float32")
    flag[0] = T.float32(1)


_flag = tvm.compile(set_flag, target="llvm")


def _eager(x, w):
    inv = torch.rsqrt(x.float().pow(2).mean(dim=-1, keepdim=True) + 1e-6)
    return (x.float() * inv * w.float()).to(x.dtype)


def run(hidden_states, weight):
    flag = torch.empty(1, dtype=torch.float32)
    _flag(flag)
    with _disable_current_modes():
        answer = _eager(hidden_states, weight)
    if flag.item() == 1.0:
        return answer
    return torch.zeros_like(hidden_states)
