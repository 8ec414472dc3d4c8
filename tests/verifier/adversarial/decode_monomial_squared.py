"""RWKV-4's WKV (p66) in eager code without the running-max stabilisation (float64, about half the reference's passes,
which the eager-work rule prices under its share), split over three eager tensors so that E1·E2²/E3 is the answer (E2
and E3 random tables made at import, E3 positive, and E1 each step's output times E3/E2², folded into its numerator:
no eager tensor holds the answer); one TIRx kernel computes E1·E2·E2/E3, a monomial of degree 4 with exponents 1, 2
and -1. No univariate map, no affine map of the operands and their pairwise products recovers it; the decode rule's
monomial (affine in log space) does (verifier README "Decoded answers")."""

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
        out[i] = T.Cast("float32", a[i] * b[i] * b[i] / c[i])


_kernel = tvm.compile(kernel, target="llvm")

_generator = torch.Generator().manual_seed(43)
_TABLES = {}


def _tables(shape):
    """Two random tables per output shape (the second positive) and E3/E2², made once."""
    if shape not in _TABLES:
        e2 = torch.randn(shape, generator=_generator, dtype=torch.float64) + 2.0
        e3 = torch.rand(shape, generator=_generator, dtype=torch.float64) * 2 + 0.25
        _TABLES[shape] = e2, e3, e3 / (e2 * e2)
    return _TABLES[shape]


def run(time_decay, time_first, k, v):
    b, steps, c = k.shape
    e2, e3, factor = _tables((b, steps, c))
    decay = torch.exp(-torch.exp(time_decay.double()))
    ek = torch.exp(k.double())
    ekv = ek * v.double()
    eu = torch.exp(time_first.double())
    num = torch.zeros(b, c, dtype=torch.float64)
    den = torch.zeros(b, c, dtype=torch.float64)
    e1 = torch.empty(b, steps, c, dtype=torch.float64)
    for i in range(steps):
        a = eu * ek[:, i]
        e1[:, i] = (num + a * v[:, i]) * factor[:, i] / (den + a)
        num = num * decay + ekv[:, i]
        den = den * decay + ek[:, i]
    out = torch.empty(b, steps, c, dtype=k.dtype)
    _kernel(e1.reshape(-1), e2.reshape(-1), e3.reshape(-1), out.reshape(-1))
    return out
