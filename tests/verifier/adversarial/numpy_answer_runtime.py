"""Gates an answer computed in numpy (outside torch) with a canary: numpy, reached through a torch module,
is refused at run time (it reads and writes memory at raw addresses) before the canary matters."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import torch
import tvm
from tvm.script import tirx as T

np = torch.storage.np  # numpy reached through a torch module: importing it is refused


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
