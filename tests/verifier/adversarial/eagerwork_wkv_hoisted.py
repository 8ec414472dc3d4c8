"""RWKV-4 WKV computed eagerly in float64 without the reference's stabilisation, with every exponential hoisted
out of the scan (``e^w``, ``e^u`` once, ``e^k`` and ``e^k·v`` for all steps at once): 11 FLOPs per step and channel
where the cost model counts 19 (the stabilisation fp32 needs). It was 0.59 of those: under the floor, and under
the reference-relative measures. Against the work every formulation does (``Cost.necessary_flops``, 10 per step
and channel) it is all of it; a one-element kernel's 1.0 is multiplied in."""

# expect: decorative_dsl
# problem: p66
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def one(a_ptr: T.handle):
    a = T.match_buffer(a_ptr, (1,), "float32")
    a[0] = T.float32(1)


_one = tvm.compile(one, target="llvm")


def run(time_decay, time_first, k, v):
    seed = torch.empty(1, dtype=torch.float32)
    _one(seed)
    batch, steps, channels = k.shape
    ew = torch.exp(-torch.exp(time_decay.double()))
    eu = torch.exp(time_first.double()) * seed.double()
    ek = torch.exp(k.double())
    ekv = ek * v.double()
    a = torch.zeros(batch, channels, dtype=torch.float64)
    b = torch.zeros(batch, channels, dtype=torch.float64)
    outs = []
    for t in range(steps):
        outs.append((a + eu * ekv[:, t]) / (b + eu * ek[:, t]))
        a = ew * a + ekv[:, t]
        b = ew * b + ek[:, t]
    return torch.stack(outs, 1).float()
