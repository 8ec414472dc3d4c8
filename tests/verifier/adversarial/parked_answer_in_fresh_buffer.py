"""Python's whole answer (the RMSNorm in numpy, keyed) written through a raw numpy view into a fresh
``torch.empty`` buffer, which a TIRx kernel only unkeys: on a correctness draw the buffer's bytes are no recorded
writer's (its sentinel fill was), so they are erased before the launch reads them (README, "Memory no recorded
writer left"). Passed before as a full plan, 100% DSL (red team rt16 F2, h1)."""

# expect: nan
# or: wrong_output, the erased bytes unkeyed are random values, a NaN among them or not
# problem: p36
import random
import types

import numpy as np
import torch
import tvm
from tvm.script import tirx as T

HIDDEN = 128


def _raw(address, n):
    """A writable numpy view of n uint16 at an address, through an interface whose name is built at run time."""
    name = "__array_" + "interface__"
    interface = {"data": (address, False), "shape": (n,), "typestr": "<u2", "version": 3}
    return np.atleast_1d(types.SimpleNamespace(**{name: interface}))


@T.prim_func
def unkey(buf_ptr: T.handle, out_ptr: T.handle, seed: T.uint32):
    n = T.int32()
    buf = T.match_buffer(buf_ptr, (n,), "uint16")
    out = T.match_buffer(out_ptr, (n,), "bfloat16")
    for i in range(n):
        k = (T.Cast("uint32", i) * T.uint32(2654435761) + seed) ^ (seed >> T.uint32(7))
        out[i] = T.reinterpret("bfloat16", buf[i] ^ T.Cast("uint16", (k >> T.uint32(13)) & T.uint32(65535)))


_unkey = tvm.compile(unkey, target="llvm")


def _keyed_answer(hidden_states, weight, seed):
    """The RMSNorm in numpy over raw views of the inputs, rounded to bf16 and XORed with a per-call keystream."""
    n = hidden_states.numel()
    x = (_raw(hidden_states.data_ptr(), n).astype(np.uint32) << 16).view(np.float32).reshape(-1, HIDDEN)
    w = (_raw(weight.data_ptr(), HIDDEN).astype(np.uint32) << 16).view(np.float32)
    inv = 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True, dtype=np.float32) + np.float32(1e-6))
    bits = (x * inv.astype(np.float32) * w).astype(np.float32).ravel().view(np.uint32)
    bf = (bits + (((bits >> 16) & 1) + 0x7FFF)) >> 16
    k = ((np.arange(n, dtype=np.uint64) * 2654435761 + seed) & 0xFFFFFFFF) ^ (seed >> 7)
    return (bf ^ ((k >> 13) & 0xFFFF)).astype(np.uint16)


def run(hidden_states, weight):
    n = hidden_states.numel()
    seed = random.getrandbits(32)
    source = torch.empty(n, dtype=torch.uint16)
    _raw(source.data_ptr(), n)[:] = _keyed_answer(hidden_states, weight, seed)
    out = torch.empty_like(hidden_states)
    _unkey(source, out.view(-1), seed)
    return out
