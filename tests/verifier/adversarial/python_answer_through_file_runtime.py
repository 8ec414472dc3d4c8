"""Takes the inputs' bytes out of the tensors through a file (a storage's ``_write_file`` into a temporary file,
read back with ``open`` and ``array``), computes the whole RMSNorm in plain Python, encodes it as 3y + 1, writes it
to a file and maps it back with ``torch.from_file``, for a TIRx kernel to decode. Nothing crosses where the audit
counts (static scan off: the runtime guards must catch it); a tensor's way to or from a file is refused while the
submission's code is on the stack."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import array
import math
import os
import tempfile

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
_FOLDER = tempfile.mkdtemp()


def _floats(tensor):
    path = os.path.join(_FOLDER, "out.bin")
    with open(path, "wb") as f:
        tensor.float().contiguous().untyped_storage()._write_file(f, True, False, 4)
    with open(path, "rb") as f:
        return array.array("f", f.read())


def run(hidden_states, weight):
    cols = hidden_states.shape[1]
    x, w = _floats(hidden_states), _floats(weight)
    encoded = array.array("f")
    for start in range(0, len(x), cols):
        row = x[start : start + cols]
        inv = 1.0 / math.sqrt(sum(v * v for v in row) / cols + 1e-6)
        encoded.extend(3.0 * v * inv * wj + 1.0 for v, wj in zip(row, w, strict=True))
    path = os.path.join(_FOLDER, "in.bin")
    with open(path, "wb") as f:
        f.write(encoded.tobytes())
    lifted = torch.from_file(path, shared=False, size=len(encoded), dtype=torch.float32)
    decoded = torch.empty_like(lifted)
    _decode(lifted, decoded)
    return decoded.view(hidden_states.shape).to(hidden_states.dtype)
