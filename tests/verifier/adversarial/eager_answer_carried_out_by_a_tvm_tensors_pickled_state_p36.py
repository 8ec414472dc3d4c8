"""p36 (red team rt65 F0): rt64 F0's eager answer read out of its tensor by the pickling protocol of a TVM tensor
(``__getstate__``, ``__reduce_ex__``: tvm_ffi's Cython binds the same C++ serialiser as ``to_json_graph_str`` where no
guard can replace it) and put back as one-element slices of an import-time table; passed as a full plan at 0% (3 of 3,
hardened included). Here ``copy.deepcopy`` calls ``__reduce_ex__`` and leaves the state, base64 bytes, in the memo it
is given: no refused name is written. The guards refuse the protocol on the first settable class of every line of TVM
objects (``test_tvm_pickling_is_refused_at_run_time``): ``forbidden_api``."""
# expect: forbidden_api
# problem: p36
import array
import base64
import copy
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
    memo: dict = {}
    copy.deepcopy(tvm.runtime.from_dlpack(keyed.contiguous()), memo)
    state = next(v for value in memo.values() if isinstance(value, list) for v in value if isinstance(v, dict))
    blob = base64.b64decode(json.loads(next(iter(state.values())))["nodes"][0]["data"])
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
