"""Takes the inputs out of the tensors as numpy views (``Tensor.numpy()``, numpy itself never imported) read by
their own ``tolist()``, computes the whole RMSNorm in plain Python, encodes it as 3y + 1 and writes it through a
numpy view of a tensor (``view[:] = list``: no torch operator), for a TIRx kernel to decode. Nothing crosses
where the audit counts (static scan off: the runtime guards must catch it); ``Tensor.numpy()`` is refused to the
submission, as numpy is."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import math

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
    cols = hidden_states.shape[1]
    x = hidden_states.float().reshape(-1).numpy().tolist()
    w = weight.float().numpy().tolist()
    encoded = []
    for start in range(0, len(x), cols):
        row = x[start : start + cols]
        inv = 1.0 / math.sqrt(sum(v * v for v in row) / cols + 1e-6)
        encoded.extend(3.0 * v * inv * wj + 1.0 for v, wj in zip(row, w, strict=True))
    lifted = torch.empty(len(encoded), dtype=torch.float32)
    lifted.numpy()[:] = encoded
    decoded = torch.empty_like(lifted)
    _decode(lifted, decoded)
    return decoded.view(hidden_states.shape).to(hidden_states.dtype)
