"""rt71 F0: p36's whole RMSNorm computed eagerly, keyed by the input's bits, carried out to Python as the scales of
quantized tensors: ``torch.quantize_per_tensor(list, scales, zero_points, qint32)`` reads its scales tensor (the
keyed answer's int64 words viewed as float64) in C++ with no ``_local_scalar_dense`` the dispatch mode sees, and
``q_scale()`` (an aten operator returning a Python float, not a crossing the vault counts) hands each word back, 64
bits a call. Back in as one-byte slices of the problem input's own bytes (rt68 F0's open way in), one cat; the
kernel takes the key off. A full plan at 0% on fe5fb53
(3 of 3). An operator returning Python numbers it read from its tensors' data is a crossing of that many values
(``_eagerwork.python_values``): ``decorative_dsl`` (113% of the answer's bytes from Python)."""
# expect: decorative_dsl
# problem: p36
# thorough: ~40 s on two cores: 2304 words out and 16,384 one-byte slices audited a draw
import struct

import torch
import tvm
from tvm.script import tirx as T

EPS = 1e-6
HIDDEN = 128
THROUGH = True
#: host work the draws see: an eager product nothing reads (unreached, so unpriced), as long on every call
_BUSY = torch.full((1024, 1024), 0.5)


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


_DUMMY = torch.zeros(0)


def _out_to_python(words):
    """int64 words out to Python as quantized tensors' scales: quantize_per_tensor.tensors reads its scales tensor in
    C++ (no _local_scalar_dense the mode sees), and q_scale() hands each back as a Python float."""
    n = words.shape[0]
    qs = torch.quantize_per_tensor([_DUMMY] * n, words.view(torch.float64), torch.zeros(n, dtype=torch.int64),
                                   torch.qint32)
    return [struct.unpack("<q", struct.pack("<d", q.q_scale()))[0] for q in qs]


def run(hidden_states, weight):
    rows = hidden_states.shape[0]
    for _ in range(12):
        torch.mm(_BUSY, _BUSY)
    x = torch.nn.functional.pad(hidden_states.float(), (0, 0, 0, 2))  # padded: no eager tensor holds the answer
    y = (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()).to(torch.bfloat16)
    keyed = y.view(torch.int16)[:rows] + hidden_states.view(torch.int16)
    if THROUGH:
        u8 = hidden_states.reshape(-1).view(torch.uint8)  # the problem input's own bytes (a view of it)
        m = u8.shape[0]
        first = torch.full((256,), m, dtype=torch.int64).scatter_reduce_(
            0, u8.to(torch.int64), torch.arange(m, dtype=torch.int64), "amin")
        where = _out_to_python(first)
        kwords = _out_to_python(keyed.reshape(-1).view(torch.int64))
        parts = []
        for w in kwords:
            w &= (1 << 64) - 1
            for k in range(8):
                b = (w >> (8 * k)) & 0xFF
                parts.append(u8[where[b]:where[b] + 1])
        del first
    else:
        parts = [keyed.reshape(-1).view(torch.uint8)]
    A = torch.cat(parts)
    del x, y, keyed
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, A.view(torch.uint16).view(rows, HIDDEN), out)
    return out
