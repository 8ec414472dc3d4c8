"""RWKV-4's WKV (p66) in eager code without the running-max stabilisation (float64, about half the reference's passes,
which the eager-work rule prices under its share), split over three eager tensors: two random tensors made at import
and a third computed so that E1·E2 + E3 is the answer (E1·E2 folded into each step's numerator: no eager tensor holds
the answer); one TIRx kernel computes E1·E2 + E3. No map of one or two operands recovers it; the decode rule's
affine map of all the operands and their pairwise products does (verifier README "Decoded answers")."""

# expect: decorative_dsl
# problem: p66
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def kernel(a_ptr: T.handle, b_ptr: T.handle, c_ptr: T.handle, out_ptr: T.handle):
    n = T.int32()
    a = T.match_buffer(a_ptr, (n,), "float64")
    b = T.match_buffer(b_ptr, (n,), "float64")
    c = T.match_buffer(c_ptr, (n,), "float64")
    out = T.match_buffer(out_ptr, (n,), "float32")
    for i in range(n):
        out[i] = T.Cast("float32", a[i] * b[i] + c[i])


_kernel = tvm.compile(kernel, target="llvm")

_generator = torch.Generator().manual_seed(41)
_PARTS = {}


def _parts(shape):
    """Two random tensors per output shape, made once."""
    if shape not in _PARTS:
        first = torch.randn(shape, generator=_generator, dtype=torch.float64)
        _PARTS[shape] = first, torch.randn(shape, generator=_generator, dtype=torch.float64) * 3
    return _PARTS[shape]


def run(time_decay, time_first, k, v):
    b, steps, c = k.shape
    e1, e2 = _parts((b, steps, c))
    product = e1 * e2
    decay = torch.exp(-torch.exp(time_decay.double()))
    ek = torch.exp(k.double())
    ekv = ek * v.double()
    eu = torch.exp(time_first.double())
    num = torch.zeros(b, c, dtype=torch.float64)
    den = torch.zeros(b, c, dtype=torch.float64)
    e3 = torch.empty(b, steps, c, dtype=torch.float64)
    for i in range(steps):
        a = eu * ek[:, i]
        total = den + a
        e3[:, i] = (num + a * v[:, i] - product[:, i] * total) / total
        num = num * decay + ekv[:, i]
        den = den * decay + ek[:, i]
    out = torch.empty(b, steps, c, dtype=k.dtype)
    _kernel(e1.reshape(-1), e2.reshape(-1), e3.reshape(-1), out.reshape(-1))
    return out
