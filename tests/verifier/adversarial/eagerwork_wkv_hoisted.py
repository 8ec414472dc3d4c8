"""RWKV-4 WKV computed eagerly in float64 without the reference's stabilisation, its exponentials hoisted out of the
scan (``e^w``, ``e^u`` once, ``e^k``, ``e^k·v`` and the bonus terms for all steps at once): the eager code runs the
recurrence and a TIRx kernel only combines its states with the bonus terms, ``(a + e^(u+k)·v) / (b + e^(u+k))``
(three of the 10-11 FLOPs per step and channel every formulation does: four operands, no map the decode rule
fits). Against the cost model, which counts the stabilisation fp32 needs (19), the eager code is 0.42, and
against the reference's element work and passes less: it passed every rule. Against the work every formulation
does (``Cost.necessary_flops``, 10 per step and channel) it is most of it."""

# expect: decorative_dsl
# problem: p66
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def combine(a_ptr: T.handle, b_ptr: T.handle, p_ptr: T.handle, q_ptr: T.handle, out_ptr: T.handle):
    n = T.int32()
    a = T.match_buffer(a_ptr, (n,), "float64")
    b = T.match_buffer(b_ptr, (n,), "float64")
    p = T.match_buffer(p_ptr, (n,), "float64")
    q = T.match_buffer(q_ptr, (n,), "float64")
    out = T.match_buffer(out_ptr, (n,), "float32")
    for i in range(n):
        out[i] = T.Cast("float32", (a[i] + p[i]) / (b[i] + q[i]))


_combine = tvm.compile(combine, target="llvm")


def run(time_decay, time_first, k, v):
    batch, steps, channels = k.shape
    ew = torch.exp(-torch.exp(time_decay.double()))
    ek = torch.exp(k.double())
    ekv = ek * v.double()
    euk = ek * torch.exp(time_first.double())  # e^(u+k), the bonus weight of each step
    eukv = euk * v.double()
    a = torch.zeros(batch, channels, dtype=torch.float64)
    b = torch.zeros(batch, channels, dtype=torch.float64)
    before_a, before_b = [], []  # the states each step starts from
    for t in range(steps):
        before_a.append(a)
        before_b.append(b)
        a = ew * a + ekv[:, t]
        b = ew * b + ek[:, t]
    out = torch.empty((batch, steps, channels), dtype=torch.float32)
    _combine(torch.stack(before_a, 1).view(-1), torch.stack(before_b, 1).view(-1), eukv.view(-1), euk.view(-1),
             out.view(-1))  # fmt: skip
    return out
