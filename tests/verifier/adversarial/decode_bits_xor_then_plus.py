"""RWKV-4's WKV (p66) in eager code without the running-max stabilisation (float64, about half the reference's passes,
which the eager-work rule prices under its share), each step's output encoded as soon as it is computed (so no eager
tensor of the output's size holds the answer): its float32 bits XOR one constant, then plus another (integer
operations on the bit view); one TIRx kernel undoes both. No single bit operation with one constant follows the
bits (the decode rule's one-key maps scored 0.48 on such an encoding); the chained keys, found bit by bit from the
lowest, do (verifier README "Decoded answers")."""

# expect: decorative_dsl
# problem: p66
import torch
import tvm
from tvm.script import tirx as T

_KEY = 0x5A5A1234
_ADDED = 0x13572468


@T.prim_func
def kernel(e_ptr: T.handle, out_ptr: T.handle):
    n = T.int32()
    e = T.match_buffer(e_ptr, (n,), "int32")
    out = T.match_buffer(out_ptr, (n,), "float32")
    for i in range(n):
        out[i] = T.reinterpret("float32", T.bitwise_xor(e[i] - T.int32(_ADDED), T.int32(_KEY)))


_kernel = tvm.compile(kernel, target="llvm")


def run(time_decay, time_first, k, v):
    b, steps, c = k.shape
    decay = torch.exp(-torch.exp(time_decay.double()))
    ek = torch.exp(k.double())
    ekv = ek * v.double()
    eu = torch.exp(time_first.double())
    num = torch.zeros(b, c, dtype=torch.float64)
    den = torch.zeros(b, c, dtype=torch.float64)
    encoded = torch.empty(b, steps, c, dtype=torch.int32)
    for i in range(steps):
        a = eu * ek[:, i]
        step = ((num + a * v[:, i]) / (den + a)).float()
        encoded[:, i] = (step.view(torch.int32) ^ _KEY) + _ADDED
        num = num * decay + ekv[:, i]
        den = den * decay + ek[:, i]
    out = torch.empty(b, steps, c, dtype=k.dtype)
    _kernel(encoded.reshape(-1), out.reshape(-1))
    return out
