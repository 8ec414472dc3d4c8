"""RWKV-4's WKV (p66) in eager code without the running-max stabilisation (float64, about half the reference's passes,
which the eager-work rule prices under its share), each step's output kept times 3 (no eager tensor holds the
answer), then its blocks of 64 elements moved into an order fixed at import; one TIRx kernel gathers each block back
and divides by 3. No map lines an operand's elements up with the output's; the decode rule finds each element's run
of neighbours in the operand by its pattern of rises and falls (verifier README "Decoded answers")."""

# expect: decorative_dsl
# problem: p66
import torch
import tvm
from tvm.script import tirx as T

BLOCK = 64


@T.prim_func
def kernel(e_ptr: T.handle, back_ptr: T.handle, out_ptr: T.handle):
    blocks = T.int32()
    e = T.match_buffer(e_ptr, (blocks, BLOCK), "float64")
    back = T.match_buffer(back_ptr, (blocks,), "int32")
    out = T.match_buffer(out_ptr, (blocks, BLOCK), "float32")
    for i, j in T.grid(blocks, BLOCK):
        out[i, j] = T.Cast("float32", e[back[i], j] / T.float64(3))


_kernel = tvm.compile(kernel, target="llvm")

_generator = torch.Generator().manual_seed(37)
_ORDERS = {}


def _order(blocks):
    """A block order per block count, made once, and its inverse."""
    if blocks not in _ORDERS:
        order = torch.randperm(blocks, generator=_generator)
        _ORDERS[blocks] = order, torch.argsort(order).to(torch.int32)
    return _ORDERS[blocks]


def run(time_decay, time_first, k, v):
    b, steps, c = k.shape
    decay = torch.exp(-torch.exp(time_decay.double()))
    ek = torch.exp(k.double())
    ekv = ek * v.double()
    eu = torch.exp(time_first.double())
    num = torch.zeros(b, c, dtype=torch.float64)
    den = torch.zeros(b, c, dtype=torch.float64)
    tripled = torch.empty(b, steps, c, dtype=torch.float64)
    for i in range(steps):
        a = eu * ek[:, i]
        tripled[:, i] = (num + a * v[:, i]) * 3.0 / (den + a)
        num = num * decay + ekv[:, i]
        den = den * decay + ek[:, i]
    blocks = tripled.numel() // BLOCK
    order, back = _order(blocks)
    moved = tripled.reshape(blocks, BLOCK)[order]
    out = torch.empty(b, steps, c, dtype=k.dtype)
    _kernel(moved, back, out.reshape(blocks, BLOCK))
    return out
