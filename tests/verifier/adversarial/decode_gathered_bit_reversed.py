"""RWKV-4's WKV (p66) in eager code without the running-max stabilisation (float64, about half the reference's passes,
which the eager-work rule prices under its share), each step's output kept times -4 (no eager tensor holds the
answer) and its elements stored at bit-reversed positions (a gather of single elements: no value lines up with the
output, no run of neighbours survives); one TIRx kernel gathers each element back through a table made at import and
divides by -4. The decode rule's order-free fit finds the operand's values, sorted, sent onto the
output's by a decreasing line, with their multiplicity (verifier README "Decoded answers")."""

# expect: decorative_dsl
# problem: p66
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def kernel(e_ptr: T.handle, source_ptr: T.handle, out_ptr: T.handle):
    n = T.int32()
    e = T.match_buffer(e_ptr, (n,), "float64")
    source = T.match_buffer(source_ptr, (n,), "int32")
    out = T.match_buffer(out_ptr, (n,), "float32")
    for i in range(n):
        out[i] = T.Cast("float32", e[source[i]] * T.float64(-0.25))


_kernel = tvm.compile(kernel, target="llvm")

_TABLES = {}


def _bit_reversed(n):
    """Element i's position with its index bits reversed (n a power of two), per size, made once."""
    if n not in _TABLES:
        bits = n.bit_length() - 1
        index = torch.arange(n)
        reversed_ = torch.zeros(n, dtype=torch.int64)
        for b in range(bits):
            reversed_ |= ((index >> b) & 1) << (bits - 1 - b)
        _TABLES[n] = reversed_, reversed_.to(torch.int32)
    return _TABLES[n]


def run(time_decay, time_first, k, v):
    b, steps, c = k.shape
    decay = torch.exp(-torch.exp(time_decay.double()))
    ek = torch.exp(k.double())
    ekv = ek * v.double()
    eu = torch.exp(time_first.double())
    num = torch.zeros(b, c, dtype=torch.float64)
    den = torch.zeros(b, c, dtype=torch.float64)
    encoded = torch.empty(b, steps, c, dtype=torch.float64)
    for i in range(steps):
        a = eu * ek[:, i]
        encoded[:, i] = (num + a * v[:, i]) * -4.0 / (den + a)
        num = num * decay + ekv[:, i]
        den = den * decay + ek[:, i]
    positions, source = _bit_reversed(encoded.numel())
    parked = torch.empty(encoded.numel(), dtype=torch.float64)
    parked[positions] = encoded.reshape(-1)
    out = torch.empty(b, steps, c, dtype=k.dtype)
    _kernel(parked, source, out.reshape(-1))
    return out
