"""A torch tensor with elements whose storage was shrunk under it: torch checks a view's sizes against its storage
only when the view is made, and ``UntypedStorage.resize_`` reallocates the storage smaller and leaves every view's
sizes as they were, so a view of 2**20 bytes lies over 16. A TIRx kernel indexing it (every index inside its
dimension, nothing clamped) reads the heap past the 16 bytes. Resizing a storage is refused
(``torch.UntypedStorage.resize_``/``TypedStorage.resize_``): a tensor's sizes stay inside its memory."""

# expect: forbidden_api
# problem: p36
# static-scan: off
import torch
import tvm
from tvm.script import tirx as T

H = 128


@T.prim_func
def peek(far: T.Buffer((1 << 20,), "uint8"), out_ptr: T.handle):
    rows = T.int32()
    out = T.match_buffer(out_ptr, (rows, H), "uint8")
    for i, j in T.grid(rows, H):
        out[i, j] = far[4096 + i * H + j]


_peek = tvm.compile(peek, target="llvm")


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    scratch = torch.empty(1 << 20, dtype=torch.uint8)
    view = scratch[:]
    scratch.untyped_storage().resize_(16)  # view: 2**20 elements over 16 bytes
    out = torch.empty_like(hidden_states)
    _peek(view, out.view(torch.uint8).view(-1, H)[: hidden_states.shape[0]])
    return out
