"""Gates an answer computed in numpy (outside torch) with a canary."""

# expect: decorative_dsl
# problem: p36
# static-scan: off
import numpy as np
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def set_flag(flag_ptr: T.handle):
    flag = T.match_buffer(flag_ptr, (1,), "float32")
    flag[0] = T.float32(1)


_flag = tvm.compile(set_flag, target="llvm")


def run(hidden_states, weight):
    flag = torch.empty(1, dtype=torch.float32)
    _flag(flag)
    x = hidden_states.float().numpy()
    inv = 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6)
    answer = torch.from_numpy(x * inv * weight.float().numpy()).to(hidden_states.dtype)
    if flag.item() == 1.0:
        return answer
    return torch.zeros_like(hidden_states)
