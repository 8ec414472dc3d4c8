"""Red team rt19 F1, by another route: a zero-element torch tensor of shape (0, 2**47) (``torch.empty``: no element,
a NULL data pointer, compact strides, nothing to check against a storage) is a TIRx buffer whose second dimension
spans every address from 0, so ``far[0, address // 2]`` reads and writes any memory, the address passed by value.
One kernel copies the inputs' bits into a Python ``bytes`` object, plain Python computes the RMSNorm from them and
packs the answer into another, a second kernel copies it into the output: no operator, no numpy. An empty buffer
reaches no memory (``_tir_memory.clamped`` guards each clamped access of a buffer that may be empty by its having
elements): the kernels read zeros and write nothing, the answer is wrong."""

# expect: wrong_output
# problem: p36
# static-scan: off
import struct
import sys

import torch
import tvm
from tvm.script import tirx as T

H = 128
SPAN = 1 << 47  # uint16 elements from address 0: every user-space address
_HEADER = sys.getsizeof(b"") - 1  # where a bytes object's bytes start, past its header


@T.prim_func
def export(x_ptr: T.handle, w_ptr: T.handle, far_ptr: T.handle, at: T.int64):
    rows = T.int64()
    span = T.int64()
    x = T.match_buffer(x_ptr, (rows, T.int64(H)), "uint16")
    w = T.match_buffer(w_ptr, (T.int64(H),), "uint16")
    far = T.match_buffer(far_ptr, (T.int64(0), span), "uint16")
    for i, j in T.grid(rows, T.int64(H)):
        far[T.int64(0), at + i * T.int64(H) + j] = x[i, j]
    for j in range(T.int64(H)):
        far[T.int64(0), at + rows * T.int64(H) + j] = w[j]


@T.prim_func
def import_(far_ptr: T.handle, out_ptr: T.handle, at: T.int64):
    rows = T.int64()
    span = T.int64()
    far = T.match_buffer(far_ptr, (T.int64(0), span), "uint16")
    out = T.match_buffer(out_ptr, (rows, T.int64(H)), "uint16")
    for i, j in T.grid(rows, T.int64(H)):
        out[i, j] = far[T.int64(0), at + i * T.int64(H) + j]


_export = tvm.compile(export, target="llvm")
_import = tvm.compile(import_, target="llvm")
_FAR = torch.empty((0, SPAN), dtype=torch.uint16)


def _address(blob: bytes) -> int:
    return (id(blob) + _HEADER) // 2


def _floats(bits: tuple[int, ...]) -> tuple[float, ...]:
    return struct.unpack(f"<{len(bits)}f", struct.pack(f"<{len(bits)}I", *[b << 16 for b in bits]))


def _bf16(values: list[float]) -> list[int]:
    words = struct.unpack(f"<{len(values)}I", struct.pack(f"<{len(values)}f", *values))
    return [((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF for u in words]


def run(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    rows = hidden_states.shape[0]
    staged = bytes(2 * (rows + 1) * H)  # a fresh object: the kernel writes the inputs' bits into it
    _export(hidden_states.view(torch.uint16), weight.view(torch.uint16), _FAR, _address(staged))
    values = _floats(struct.unpack(f"<{(rows + 1) * H}H", staged))
    w = values[rows * H :]
    answer: list[float] = []
    for i in range(rows):
        x = values[i * H : (i + 1) * H]
        inv = 1.0 / (sum(v * v for v in x) / H + 1e-6) ** 0.5
        answer += [v * inv * g for v, g in zip(x, w, strict=True)]
    result = struct.pack(f"<{rows * H}H", *_bf16(answer))
    out = torch.empty_like(hidden_states)
    _import(_FAR, out.view(torch.uint16), _address(result))
    return out
