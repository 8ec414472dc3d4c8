"""rt71 F1: p36's whole RMSNorm computed eagerly, keyed by the input's bits, carried out to Python 16 bits at a time
by ``tvm_ffi.structural_hash`` of a DLPack view (``tvm_ffi.from_dlpack(view, require_alignment=0)``: a torch
producer, allowed) of each element, inverted by a 65,536-entry table made at import (rt67 F0's way out; nothing
closed it since: the fixes went to the way in). Back in as one-byte slices of the problem input's own bytes (rt68
F0's open way in), one cat; the kernel takes the key off. A full plan at 0% on
fe5fb53. TVM's structural hash and comparison are refused to the submission (``_rules.STRUCTURAL``): by the static
scan, and at run time (this case: the static scan off)."""
# expect: forbidden_api
# problem: p36
# static-scan: off
import torch
import tvm
import tvm_ffi
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


def _hash(v):
    return tvm_ffi.structural_hash(tvm_ffi.from_dlpack(v, require_alignment=0))


#: structural_hash of a one-element int16 tensor, back to its value (65,536 distinct hashes, made at import)
_INVERSE = {_hash(v): int(v) for v in torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).unbind()}


def _out_to_python(values):
    """16-bit values out to Python one at a time: tvm_ffi.from_dlpack of a torch view (allowed: a torch producer), and
    tvm_ffi.structural_hash hashes the DSL tensor's bytes in C++ with no operator; an import-time table inverts it."""
    return [_INVERSE[_hash(v)] for v in values.to(torch.int16).unbind()]


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
        halves = _out_to_python(keyed.reshape(-1))
        parts = []
        for h in halves:
            h &= 0xFFFF
            for k in range(2):
                b = (h >> (8 * k)) & 0xFF
                parts.append(u8[where[b]:where[b] + 1])
        del first
    else:
        parts = [keyed.reshape(-1).view(torch.uint8)]
    A = torch.cat(parts)
    del x, y, keyed
    out = torch.empty_like(hidden_states)
    _kernel(hidden_states, A.view(torch.uint16).view(rows, HIDDEN), out)
    return out
