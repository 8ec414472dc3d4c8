"""An answer laundered through ``Tensor.set_``: numpy computes p36 over raw views of the inputs and raw-writes it,
encoded as inverse-Gray(answer) XOR the input's bits, into a tensor made once (recorded by the census); a fresh tensor
``set_`` over that storage goes to the TIRx kernel, which computes gray(e ^ x). The vault took ``set_`` (its schema
writes ``self``) for the writer of those bytes and vouched for them; the decode rule has no fit for a map of an eager
operand XOR an input. A full plan, 0% eager, passed before (red team rt18 F5b). In-place views (torch's
``inplace_view`` tag) now write no byte: the storage's changed bytes are erased before the launch reads them."""

# expect: nan
# or: wrong_output, the erased bytes decoded through gray(e ^ x) are NaN or garbage
# problem: p36
import types

import numpy as np
import torch
import tvm
from tvm.script import tirx as T

H = 128
_NAME = "".join(map(chr, (95, 95, 97, 114, 114, 97, 121, 95, 105, 110, 116, 101, 114, 102, 97, 99, 101, 95, 95)))


@T.prim_func
def emit(x_ptr: T.handle, e_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, H), "bfloat16")
    e = T.match_buffer(e_ptr, (rows, H), "uint16")
    out = T.match_buffer(out_ptr, (rows, H), "bfloat16")
    for i, j in T.grid(rows, H):
        word = e[i, j] ^ T.reinterpret("uint16", x[i, j])
        out[i, j] = T.reinterpret("bfloat16", word ^ T.shift_right(word, T.uint16(1)))


_emit = tvm.compile(emit, target="llvm")


def _view(addr, n, typestr):
    iface = {"data": (addr, False), "shape": (n,), "typestr": typestr, "version": 3}
    return np.atleast_1d(types.SimpleNamespace(**{_NAME: iface}))


def _answer(hidden_states, weight, rows):
    xs = _view(hidden_states.data_ptr(), rows * H, "<u2").astype(np.uint32) << np.uint32(16)
    ws = _view(weight.data_ptr(), H, "<u2").astype(np.uint32) << np.uint32(16)
    x = xs.view(np.float32).reshape(rows, H)
    w = ws.view(np.float32)
    inv = np.float32(1.0) / np.sqrt((x * x).mean(axis=1, keepdims=True) + np.float32(1e-6))
    b = (x * inv * w).astype(np.float32).view(np.uint32)
    b = ((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    for s in (1, 2, 4, 8):  # inverse Gray code
        b ^= b >> np.uint16(s)
    return b.reshape(-1) ^ _view(hidden_states.data_ptr(), rows * H, "<u2")


POOL = {}


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    rows = hidden_states.shape[0]
    if rows not in POOL:
        POOL[rows] = torch.zeros(rows, H, dtype=torch.uint16)
    P = POOL[rows]
    _view(P.data_ptr(), rows * H, "<u2")[:] = _answer(hidden_states, weight, rows)
    t = torch.empty(0, dtype=torch.uint16).set_(P.untyped_storage(), 0, (rows, H), (H, 1))
    out = torch.empty_like(hidden_states)
    _emit(hidden_states, t, out)
    return out
