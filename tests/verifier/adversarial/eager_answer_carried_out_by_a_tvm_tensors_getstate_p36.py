"""p36 (red team rt65 F0, its case): rt64 F0's eager answer read out of its tensor by a TVM tensor's ``__getstate__()``
(tvm_ffi's Cython binds the serialiser ``to_json_graph_str`` reaches where no guard can replace it: base64 bytes in a
dict) and put back as one-element slices of an import-time table joined by one ``cat``; the kernel takes the key off.
A full plan at 0%, 3 of 3 (default and hardened). The static scan refuses the pickling protocol's names; with it off,
the guards refuse the call (``test_tvm_pickling_is_refused_at_run_time``): ``forbidden_api``."""
# expect: forbidden_api
# problem: p36
import array
import base64
import json

import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128

_TABLE = torch.arange(65536, dtype=torch.int32).to(torch.int16)


@T.prim_func
def unkey(x_ptr: T.handle, s_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, HIDDEN), "bfloat16")
    s = T.match_buffer(s_ptr, (rows, HIDDEN), "uint16")
    out = T.match_buffer(out_ptr, (rows, HIDDEN), "bfloat16")
    for i in range(rows):
        for j in range(HIDDEN):
            bits = T.Cast("uint32", s[i, j] - T.reinterpret("uint16", x[i, j]))
            out[i, j] = T.reinterpret("bfloat16", T.Cast("uint16", bits))


_kernel = tvm.compile(unkey, target="llvm")


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    n = rows * HIDDEN
    x = torch.nn.functional.pad(hidden_states.float(), (0, 0, 0, 2))
    y = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
    keyed = y.view(torch.int16)[:rows] + hidden_states.view(torch.int16)
    state = tvm.runtime.from_dlpack(keyed.contiguous()).__getstate__()
    blob = base64.b64decode(json.loads(state["handle"])["nodes"][0]["data"])
    vals = array.array("H")
    vals.frombytes(blob[-2 * n:])
    parts = [_TABLE[v:v + 1] for v in vals]
    parts.append(hidden_states.view(torch.int16).reshape(-1)[:1])
    A = torch.empty((n + 1,), dtype=torch.int16)
    torch.cat(parts, out=A)
    del x, y, keyed
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, A[:n].view(torch.uint16).view(rows, HIDDEN), out)
    return out
