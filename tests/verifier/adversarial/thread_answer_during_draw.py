"""Eager PyTorch computes the whole RMSNorm in a thread it starts and joins inside run() (the verifier's dispatch
modes are thread-local, so none of that work is seen), on a padded copy, encoded as 3y + 1; a TIRx kernel
decodes it into the output. A thread started during a correctness draw fails it: its work cannot be audited."""

# expect: decorative_dsl
# or: nan, the thread's writes are memory no recorded writer left, erased before the launch reads them
# problem: p36
import threading

import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def decode(e_ptr: T.handle, y_ptr: T.handle):
    n = T.int32()
    e = T.match_buffer(e_ptr, (n,), "float32")
    y = T.match_buffer(y_ptr, (n,), "float32")
    for i in range(n):
        y[i] = (e[i] - T.float32(1)) / T.float32(3)


_decode = tvm.compile(decode, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    box = {}

    def work():
        x = torch.nn.functional.pad(hidden_states.float(), (0, 0, 0, 2))
        y = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * weight.float()
        box["e"] = (y * 3 + 1)[:rows].reshape(-1).clone()

    t = threading.Thread(target=work)
    t.start()
    t.join()
    decoded = torch.empty(rows * hidden_states.shape[1], dtype=torch.float32)
    _decode(box["e"], decoded)
    return decoded.view(hidden_states.shape).to(hidden_states.dtype)
