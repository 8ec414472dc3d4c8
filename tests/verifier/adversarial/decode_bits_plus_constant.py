"""RWKV-4's WKV (p66) in eager code without the running-max stabilisation (float64, about half the reference's passes,
which the eager-work rule prices under its share), each step's output computed with a random offset R folded into
its numerator (so no eager tensor holds the answer): (num + a·v + R·(den + a)) / (den + a); its float32 bits plus a
constant (integer addition on the bit view); one TIRx kernel takes the constant off the bits and R off the value.
No interpolated map of the operands' values follows the bits; the decode rule's constant key, found against the
output plus an operand, does (verifier README "Decoded answers")."""

# expect: decorative_dsl
# problem: p66
import torch
import tvm
from tvm.script import tirx as T

_CONSTANT = 0x2B5E3A17


@T.prim_func
def kernel(e_ptr: T.handle, r_ptr: T.handle, out_ptr: T.handle):
    n = T.int32()
    e = T.match_buffer(e_ptr, (n,), "int32")
    r = T.match_buffer(r_ptr, (n,), "float32")
    out = T.match_buffer(out_ptr, (n,), "float32")
    for i in range(n):
        out[i] = T.reinterpret("float32", e[i] - T.int32(_CONSTANT)) - r[i]


_kernel = tvm.compile(kernel, target="llvm")

_generator = torch.Generator().manual_seed(31)
_OFFSETS = {}


def _offset(shape):
    if shape not in _OFFSETS:
        _OFFSETS[shape] = torch.randn(shape, generator=_generator, dtype=torch.float64) * 2.0
    return _OFFSETS[shape]


def run(time_decay, time_first, k, v):
    b, steps, c = k.shape
    r = _offset((b, steps, c))
    decay = torch.exp(-torch.exp(time_decay.double()))
    ek = torch.exp(k.double())
    ekv = ek * v.double()
    eu = torch.exp(time_first.double())
    num = torch.zeros(b, c, dtype=torch.float64)
    den = torch.zeros(b, c, dtype=torch.float64)
    shifted = torch.empty(b, steps, c, dtype=torch.float64)
    for i in range(steps):
        a = eu * ek[:, i]
        total = den + a
        shifted[:, i] = (num + a * v[:, i] + r[:, i] * total) / total
        num = num * decay + ekv[:, i]
        den = den * decay + ek[:, i]
    encoded = shifted.float().view(torch.int32) + _CONSTANT
    out = torch.empty(b, steps, c, dtype=k.dtype)
    _kernel(encoded.reshape(-1), r.float().reshape(-1), out.reshape(-1))
    return out
