"""Takes the inputs' bytes out of the tensors through serialisation (``torch.save`` into a BytesIO, read back with
``zipfile`` and ``array``: no ``item()``, no ``tolist()``), computes the whole RMSNorm in plain Python, encodes it as
3y + 1 and brings it back as a storage made from the bytes (``torch.UntypedStorage(bytes)`` set under a tensor:
no ``torch.tensor``), for a TIRx kernel to decode. Nothing crosses where the audit counts (static scan off: the
runtime guards must catch it); serialisation is refused while the submission's code is on the stack."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import array
import io
import math
import zipfile

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


def _floats(tensor):
    saved = io.BytesIO()
    torch.save(tensor.float().contiguous(), saved)
    archive = zipfile.ZipFile(io.BytesIO(saved.getvalue()))
    (data,) = [name for name in archive.namelist() if "/data/" in name]
    return array.array("f", archive.read(data))


def run(hidden_states, weight):
    cols = hidden_states.shape[1]
    x, w = _floats(hidden_states), _floats(weight)
    encoded = array.array("f")
    for start in range(0, len(x), cols):
        row = x[start : start + cols]
        inv = 1.0 / math.sqrt(sum(v * v for v in row) / cols + 1e-6)
        encoded.extend(3.0 * v * inv * wj + 1.0 for v, wj in zip(row, w, strict=True))
    lifted = torch.empty(0, dtype=torch.float32).set_(torch.UntypedStorage(encoded.tobytes()), 0, (len(encoded),))
    decoded = torch.empty_like(lifted)
    _decode(lifted, decoded)
    return decoded.view(hidden_states.shape).to(hidden_states.dtype)
