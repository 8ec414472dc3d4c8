"""Shared memory for a block of calls: each call's inputs the verifier wrote and the slots the worker copies
its outputs into (DESIGN §5, timing).

CPU: an anonymous memfd passed over the socket, so no file name exists that another process could
open. CUDA: one device allocation shared through CUDA IPC; or, for a sandboxed worker (CUDA IPC fails
across the sandbox's boundary: "mapping of buffer object failed" on the H200), *staged*: each side holds
its own device copy and the bytes travel through a memfd, copied in before the block's first call and out
after its last, outside every timed call. Inputs keep their shapes and strides; output slots are contiguous in the
shapes the problem declares. This module is the verifier's side; the worker maps the block with ``_mapped``.
"""

from __future__ import annotations

import math
import mmap
import os
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

_ALIGN = 256
_Base = torch._C.TensorBase
_finalize = weakref.finalize


def cuda_pages() -> tuple[Any, Any] | None:
    """CUDA's ``cudaHostRegister`` and ``cudaHostUnregister`` (C functions), or None without a CUDA runtime."""
    try:
        cudart = torch.cuda.cudart()
        return cudart.cudaHostRegister, cudart.cudaHostUnregister
    except Exception:  # no CUDA runtime here
        return None


def lock_pages(
    host: torch.Tensor, *, _register: Any, _data_ptr: Any = _Base.data_ptr, _numel: Any = _Base.numel,
    _int: Any = int, _exception: Any = Exception
) -> int:  # fmt: skip
    """Page-lock a staged arena's memfd mapping for the copy engines; its address, to unlock it, or 0.

    Pageable copies go through the driver's bounce buffer by CPU memcpy: a 135 MB arena copied in and out
    around every call kept the GPU idle for tens of milliseconds and evicted the host caches, and the next
    call's Python dispatch then ran 4-6x slower than in a plain loop (benchmarks/RESULTS.md, "Cold host on
    the H200"). Registered pages are copied by DMA. Best effort: 0 where the driver refuses. (Every function it
    calls is a keyword-only default: the worker runs it as a hook, ``_mapped``.)"""
    try:
        address, size = _data_ptr(host), _numel(host)
        if size == 0 or _int(_register(address, size, 0)) != 0:
            return 0
    except _exception:  # a driver refusing to lock these pages
        return 0
    return address


def unlock_pages(address: int, *, _unregister: Any, _exception: Any = Exception) -> None:
    # the process may be ending, or CUDA gone: the mapping's pages go with it then
    try:
        _unregister(address)
    except _exception:
        return


def pin(host: torch.Tensor, owner: object) -> bool:
    """``lock_pages`` until ``owner`` is collected (the verifier's side of a staged block)."""
    pages = cuda_pages()
    address = lock_pages(host, _register=pages[0]) if pages is not None else 0
    if address:
        _finalize(owner, unlock_pages, address, _unregister=pages[1])  # type: ignore[index]
    return bool(address)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def dtype_from_name(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"not a torch dtype: {name!r}")
    return dtype


def _extent(shape: Sequence[int], stride: Sequence[int]) -> int:
    """Elements of storage a strided view spans (0 for an empty tensor)."""
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((n - 1) * st for n, st in zip(shape, stride, strict=True))


@dataclass(frozen=True)
class Slot:
    offset: int
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return _extent(self.shape, self.stride) * dtype_from_name(self.dtype).itemsize

    def view(self, base: torch.Tensor) -> torch.Tensor:
        # through the C base class: in the worker, torch.Tensor's Python methods may have been replaced
        dtype = dtype_from_name(self.dtype)
        n = _extent(self.shape, self.stride)
        flat = _Base.view(_Base.__getitem__(base, slice(self.offset, self.offset + n * dtype.itemsize)), dtype)
        return _Base.as_strided(flat, self.shape, self.stride)


def _layout(specs: Sequence[tuple[tuple[int, ...], tuple[int, ...], torch.dtype]]) -> tuple[list[Slot], int]:
    slots, offset = [], 0
    for shape, stride, dtype in specs:
        slot = Slot(offset, _dtype_name(dtype), tuple(shape), tuple(stride))
        slots.append(slot)
        offset += -(-slot.nbytes // _ALIGN) * _ALIGN
    return slots, max(offset, _ALIGN)


def contiguous_stride(shape: Sequence[int]) -> tuple[int, ...]:
    stride, acc = [], 1
    for n in reversed(shape):
        stride.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(stride))


def _shareable_stride(x: torch.Tensor) -> tuple[int, ...]:
    """The input's own strides, unless elements overlap (a broadcast view): then contiguous."""
    if any(st == 0 and n > 1 for n, st in zip(x.shape, x.stride(), strict=True)):
        return contiguous_stride(tuple(x.shape))
    return tuple(x.stride())


def _arena_layout(
    inputs: Sequence[Any], outputs: Sequence[tuple[tuple[int, ...], torch.dtype] | None]
) -> tuple[list[Any], list[Slot], int]:
    """(the inputs' tensor specs, every slot, the bytes) of an arena for ``inputs`` and ``outputs``."""
    tensor_specs = [(tuple(x.shape), _shareable_stride(x), x.dtype) for x in inputs if isinstance(x, torch.Tensor)]
    out_specs = [(shape, contiguous_stride(shape), dtype) for shape, dtype in (o for o in outputs if o is not None)]
    slots, nbytes = _layout(tensor_specs + out_specs)
    return tensor_specs, slots, nbytes


def _memfd(nbytes: int) -> tuple[int, mmap.mmap, torch.Tensor]:
    fd = os.memfd_create("mkbsim-arena", os.MFD_CLOEXEC)
    os.ftruncate(fd, nbytes)
    mm = mmap.mmap(fd, nbytes)
    return fd, mm, torch.frombuffer(mm, dtype=torch.uint8)


class Arena:
    """Verifier side: one call's inputs and output slots, laid out over its span of a block's memory
    (``BlockArenas``, which owns the memory and moves it to the worker)."""

    def __init__(
        self, inputs: Sequence[Any], outputs: Sequence[tuple[tuple[int, ...], torch.dtype] | None], memory: torch.Tensor
    ) -> None:
        tensor_specs, slots, self.nbytes = _arena_layout(inputs, outputs)
        self.base = memory
        n_in = len(tensor_specs)
        self.input_slots, self.output_slots = slots[:n_in], slots[n_in:]
        # Scalars travel by value; tensors as views of the shared memory.
        self.args: list[Any] = []
        self.scalars: dict[int, Any] = {}
        it = iter(self.input_slots)
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor):
                view = next(it).view(self.base)
                view.copy_(x)
                self.args.append(view)
            else:
                self.scalars[i] = x
                self.args.append(x)
        self.out_views = [s.view(self.base) for s in self.output_slots]
        # output slots start zeroed; only they: the inputs' slots were just written, and the block's memory is new
        # (a memfd, or zeros), so its padding is zero (zeroing the whole arena wrote p25's 25 MB of inputs twice)
        for out in self.out_views:
            out.zero_()
        self.out_positions = [i for i, o in enumerate(outputs) if o is not None]
        self.n_outputs = len(outputs)

    def layout(self) -> dict[str, Any]:
        """Where the arguments and output slots lie in this arena's memory, and the scalars."""
        return {
            "nbytes": self.nbytes,
            "n_args": len(self.args),
            "scalars": self.scalars,
            "inputs": [vars(s) for s in self.input_slots],
            "outputs": [vars(s) for s in self.output_slots],
            "out_positions": self.out_positions,
            "n_outputs": self.n_outputs,
        }


class BlockArenas:
    """Verifier side: the arenas of one block's calls (DESIGN §5, timing): one memfd (cpu, staged), one mapping in
    the worker, one staging copy each way here, so every call's fresh inputs are in the worker's memory before the
    block's first call, and every call's outputs stay in its own slots until the block answers. In the worker each
    call's memory is a storage of its own (``_mapped.block_memory``: no call reaches another's through its tensors'
    storage); shared by CUDA IPC, each call's arena is an allocation of its own here, shared as such."""

    def __init__(self, draws: Sequence[Sequence[Any]], outputs: Sequence[tuple[tuple[int, ...], torch.dtype] | None],
                 device: torch.device, staged: bool = False) -> None:  # fmt: skip
        sizes = [-(-block_bytes(d, outputs) // _ALIGN) * _ALIGN for d in draws]
        self.offsets = [sum(sizes[:i]) for i in range(len(sizes))]
        self.nbytes = max(sum(sizes), _ALIGN)
        self.device = device
        self._fd: int | None = None
        self.host: torch.Tensor | None = None
        self.base: torch.Tensor | None  # the block's memory here; None: each call's an allocation of its own
        if staged:
            self._fd, self._mm, self.host = _memfd(self.nbytes)
            pin(self.host, self)
            self.base = torch.zeros(self.nbytes, dtype=torch.uint8, device=device)
        elif device.type == "cpu":
            self._fd, self._mm, self.base = _memfd(self.nbytes)
        else:
            self.base = None
        spans = zip(draws, self.offsets, sizes, strict=True)
        self.arenas = [Arena(d, outputs, self._memory(o, n)) for d, o, n in spans]

    def _memory(self, offset: int, nbytes: int) -> torch.Tensor:
        """A call's memory: its span of the block's, or (CUDA IPC) an allocation of its own."""
        if self.base is None:
            return torch.zeros(nbytes, dtype=torch.uint8, device=self.device)
        return self.base[offset : offset + nbytes]

    def descriptor(self) -> tuple[dict[str, Any], list[int]]:
        """What the worker needs to map the block, and the descriptor to pass with it."""
        desc: dict[str, Any] = {
            "nbytes": self.nbytes,
            "arenas": [{**a.layout(), "offset": o} for a, o in zip(self.arenas, self.offsets, strict=True)],
        }
        if self.host is not None and self.base is not None:
            self.host.copy_(self.base)  # every call's draw, in one copy
            desc["staged"] = True
        if self._fd is not None:
            return desc, [self._fd]
        from torch.multiprocessing.reductions import reduce_tensor

        desc["cuda_ipc"] = [reduce_tensor(a.base) for a in self.arenas]
        return desc, []

    def arrived(self) -> None:
        """The worker has answered: a staged block takes back what its calls wrote."""
        if self.host is not None and self.base is not None:
            self.base.copy_(self.host)

    def release_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def block_bytes(inputs: Sequence[Any], outputs: Sequence[tuple[tuple[int, ...], torch.dtype] | None]) -> int:
    """The bytes one call's arena takes in a block."""
    return _arena_layout(inputs, outputs)[2]


def delivered_bytes(
    inputs: Sequence[Any], outputs: Sequence[tuple[tuple[int, ...], torch.dtype] | None], inplace: Sequence[int]
) -> int:
    """The bytes of the worker's copies of what one call delivers (``_mapped.delivered_vault``): its output slots
    and in-place inputs."""
    slots = sum(math.prod(shape) * dtype.itemsize for shape, dtype in (o for o in outputs if o is not None))
    return slots + sum(inputs[i].numel() * inputs[i].element_size() for i in inplace)
