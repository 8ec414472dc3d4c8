"""A view's sizes past its memory again, through the class the storage methods live on: ``UntypedStorage`` inherits
``resize_`` from ``torch._C.StorageBase``, an immutable C type, so calling ``torch._C.StorageBase.resize_(storage, 16)``
skipped the refusal on ``UntypedStorage.resize_`` and left a 2**20-byte view over 16 bytes; a TIRx kernel indexing it
reads the heap. The launch gate refused it (it checks every tensor argument's span against its storage on every call:
``exception``); the guards now set their hooks on the class that defines a method, immutable ones included
(``Guards.replace``, red team rt70 F0's class), and the call to the base class's ``resize_`` is refused itself."""

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
_resize = torch._C.StorageBase.resize_


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    scratch = torch.empty(1 << 20, dtype=torch.uint8)
    view = scratch[:]
    _resize(scratch.untyped_storage(), 16)  # view: 2**20 elements over 16 bytes
    out = torch.empty_like(hidden_states)
    _peek(view, out.view(torch.uint8).view(-1, H)[: hidden_states.shape[0]])
    return out
