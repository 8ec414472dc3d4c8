"""The erased-storage bit channel at full bandwidth: numpy computes p36's inverse RMS over raw views of the inputs and
writes each row's top 24 bits as a NaN, or none, into 24 one-element ``torch.ones(1)`` storages (made once, recorded by
the census as 1.0); one ``torch.cat`` reads them all (the erasure of a changed storage is NaN, which the bit wanted
anyway) and the TIRx kernel decodes ``isnan`` into the row's scale. A full plan, 100% DSL, passed before (red team rt18
F3, h2b). Each erased storage now counts as a value from Python (``ERASED_STORAGES``): 43% of the answer's bytes, over
``PYTHON_SHARE``."""

# expect: decorative_dsl
# problem: p36
# thorough: ~20 s on two cores: numpy's row scales and 24 storages erased on every call
import types

import numpy as np
import torch
import tvm
from tvm.script import tirx as T

H = 128
_NAME = "".join(map(chr, (95, 95, 97, 114, 114, 97, 121, 95, 105, 110, 116, 101, 114, 102, 97, 99, 101, 95, 95)))


@T.prim_func
def scale_rows(x_ptr: T.handle, b_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, H), "bfloat16")
    bits = T.match_buffer(b_ptr, (rows * 24,), "float32")
    w = T.match_buffer(w_ptr, (H,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, H), "bfloat16")
    acc = T.alloc_buffer((1,), "uint32", scope="local")
    for i in range(rows):
        acc[0] = T.uint32(0)
        for k in range(24):
            if T.isnan(bits[i * 24 + k]):
                acc[0] = acc[0] | T.shift_left(T.uint32(1), T.Cast("uint32", k + 8))
        for j in range(H):
            scale = T.reinterpret("float32", acc[0]) * T.Cast("float32", w[j])
            out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * scale)


_scale = tvm.compile(scale_rows, target="llvm")


def _view(addr, n, typestr):
    iface = {"data": (addr, False), "shape": (n,), "typestr": typestr, "version": 3}
    return np.atleast_1d(types.SimpleNamespace(**{_NAME: iface}))


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    rows = hidden_states.shape[0]
    xs = _view(hidden_states.data_ptr(), rows * H, "<u2").astype(np.uint32) << np.uint32(16)
    x = xs.view(np.float32).reshape(rows, H)
    inv = (np.float32(1.0) / np.sqrt((x * x).mean(axis=1) + np.float32(1e-6))).astype(np.float32)
    ib = inv.view(np.uint32)
    while len(POOL) < rows * 24:
        POOL.append(torch.ones(1))
    pool = POOL[: rows * 24]
    nan = np.float32("nan")
    dirty = []
    for i in range(rows):
        v = int(ib[i]) + 0x80  # round to the top 24 bits
        for k in range(24):
            if (v >> (k + 8)) & 1:
                view = _view(pool[i * 24 + k].data_ptr(), 1, "<f4")
                view[0] = nan
                dirty.append(view)
    bits = torch.cat(pool)
    out = torch.empty_like(hidden_states)
    _scale(hidden_states, bits, weight, out)
    for view in dirty:  # clean for the next call (no operator reads them again in this one)
        view[0] = np.float32(1.0)
    return out


POOL = []
