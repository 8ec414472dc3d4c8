"""RWKV-4 WKV computed eagerly in another formulation than the reference's: in float64 exp(100) is finite, so
the recurrence is written as it is defined, without the reference's max-tracking stabilisation, and its loop makes
fewer and other operators (against the reference: 57% of its element work, 57% of its passes). Against the
problem's own cost model (``cost()``, formulation-free) the eager code does 69% of the useful arithmetic; a
one-element kernel's 1.0 is multiplied in."""

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
    w = -torch.exp(time_decay.double())
    u = time_first.double() * seed.double()
    kd, vd = k.double(), v.double()
    a = torch.zeros(batch, channels, dtype=torch.float64)
    b = torch.zeros(batch, channels, dtype=torch.float64)
    outs = []
    for t in range(steps):
        now = torch.exp(u + kd[:, t])
        outs.append((a + now * vd[:, t]) / (b + now))
        ek = torch.exp(kd[:, t])
        a = torch.exp(w) * a + ek * vd[:, t]
        b = torch.exp(w) * b + ek
    return torch.stack(outs, 1).float()
