"""Shared memory for a block of calls: each call's inputs the verifier wrote and the slots the worker copies
its outputs into (DESIGN §5, timing).

CPU: an anonymous memfd passed over the socket, so no file name exists that another process could
open. CUDA: one device allocation shared through CUDA IPC; or, for a sandboxed worker (CUDA IPC fails
across the sandbox's boundary: "mapping of buffer object failed" on the H200), *staged*: each side holds
its own device copy and the bytes travel through a memfd, copied in before the block's first call and out
after its last, outside every timed call. Inputs keep their shapes and strides; output slots are contiguous in the
shapes the problem declares.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from mkbsim.verifier._mapping import map_shared

_ALIGN = 256
_Base = torch._C.TensorBase
_MAP_POPULATE = getattr(mmap, "MAP_POPULATE", 0)  # Linux
# captured when the harness is imported: the worker's guards replace weakref.finalize for submissions
_finalize = weakref.finalize
_cudart = torch.cuda.cudart


def _unpin(address: int) -> None:
    # the process may be ending, or CUDA gone: the mapping's pages go with it then
    with contextlib.suppress(Exception):
        _cudart().cudaHostUnregister(address)


def pin(host: torch.Tensor, owner: object) -> bool:
    """Page-lock a staged arena's memfd mapping for the copy engines, until ``owner`` is collected.

    Pageable copies go through the driver's bounce buffer by CPU memcpy: a 135 MB arena copied in and out
    around every call kept the GPU idle for tens of milliseconds and evicted the host caches, and the next
    call's Python dispatch then ran 4-6x slower than in a plain loop (benchmarks/RESULTS.md, "Cold host on
    the H200"). Registered pages are copied by DMA. Best effort: False where the driver refuses."""
    try:
        address, size = host.data_ptr(), host.numel()
        if size == 0 or int(_cudart().cudaHostRegister(address, size, 0)) != 0:
            return False
    except Exception:  # no CUDA runtime here, or a driver refusing to lock these pages
        return False
    _finalize(owner, _unpin, address)
    return True


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
        self.base.zero_()  # output slots start zeroed
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


@dataclass
class MappedArena:
    """Worker side: the arguments for run() and the output slots, over shared memory."""

    args: list[Any]
    outputs: list[torch.Tensor | None]
    keepalive: Any
    base: torch.Tensor | None = None
    host: torch.Tensor | None = None  # staged: the memfd the bytes travel through (``base`` is this process's own)
    kept: list[torch.Tensor] | None = None  # the outputs as the last call on this arena left them (``keep``)

    def reserve(self) -> None:
        """Memory for ``keep``, made and touched when the block is mapped, before its first call: a copy
        allocated per call would leave each run() fresh pages to fault in, timed as its own work."""
        self.kept = [_Base.clone(o) for o in self.outputs if o is not None]

    def keep(self) -> None:
        """The harness's copy of the output slots as the call on this arena delivered them, taken right after
        the call, out of its timed window, for every call alike: ``restore`` puts it back before the verifier
        reads the slots, so a later call of the block rewriting them changes nothing. In-place inputs are not
        copied (a whole cache per call: 9 ms of CPU a call for p25 at SMOKE; verifier README, Known limits)."""
        for copy, slot in zip(self.kept or (), (o for o in self.outputs if o is not None), strict=True):
            _Base.copy_(copy, slot)

    def restore(self) -> None:
        for slot, copy in zip((o for o in self.outputs if o is not None), self.kept or (), strict=True):
            _Base.copy_(slot, copy)

    def stage_in(self) -> None:
        """Staged: the block's draws into the worker's own memory (before its first call, outside every timed call)."""
        if self.host is not None and self.base is not None:
            _Base.copy_(self.base, self.host)
            if self.base.is_cuda:
                torch.cuda.synchronize(self.base.device)

    def stage_out(self) -> None:
        """Staged: the outputs and in-place inputs back to the verifier (after the block's last call)."""
        if self.host is not None and self.base is not None:
            _Base.copy_(self.host, self.base)

    def null_run(self, *args: Any) -> Any:
        """The harness's own trivial "kernel" (new outputs of the declared form, their bytes left as they are),
        timed like run() so that the verifier measures the harness around a call in this very process. It does
        not read the slots: the harness then copies its outputs into slots no one touched since the block was
        staged in, as it does a submission's (in a block every call's slots are its own)."""
        made = [_Base.new_empty(o, _Base.size(o)) if o is not None else 0.0 for o in self.outputs]
        return made[0] if len(made) == 1 else tuple(made)


def _mapped(desc: dict[str, Any], base: torch.Tensor, host: torch.Tensor | None, keepalive: Any) -> MappedArena:
    """The arguments and output slots ``desc`` lays out over ``base``."""
    inputs = iter(Slot(**s).view(base) for s in desc["inputs"])
    scalars = desc["scalars"]
    args = [scalars[i] if i in scalars else next(inputs) for i in range(desc["n_args"])]
    out_views = [Slot(**s).view(base) for s in desc["outputs"]]
    outputs: list[torch.Tensor | None] = [None] * desc["n_outputs"]
    for pos, view in zip(desc["out_positions"], out_views, strict=True):
        outputs[pos] = view
    return MappedArena(args=args, outputs=outputs, keepalive=keepalive, base=base, host=host)


def _block_memory(desc: dict[str, Any], fds: list[int], device: torch.device) -> MappedArena:
    """Worker side: a block's whole memory, mapped once (and, staged, copied into this process's own once)."""
    host: torch.Tensor | None = None
    if desc.get("staged"):
        mm = map_shared(fds[0], desc["nbytes"], mmap.MAP_SHARED | _MAP_POPULATE)
        host = torch.frombuffer(mm, dtype=torch.uint8)
        base = torch.empty(desc["nbytes"], dtype=torch.uint8, device=device)
        keepalive: Any = mm
    elif "cuda_ipc" in desc:
        rebuild, rebuild_args = desc["cuda_ipc"]
        base = rebuild(*rebuild_args)
        keepalive = base
    else:
        # MAP_POPULATE faults the whole mapping in now, before the timed calls: otherwise the first touch of
        # every page (a minor fault each) would be timed as the submission's work, which a plain process
        # reusing its own memory never pays.
        mm = map_shared(fds[0], desc["nbytes"], mmap.MAP_SHARED | _MAP_POPULATE)
        base = torch.frombuffer(mm, dtype=torch.uint8)
        keepalive = mm
    return MappedArena(args=[], outputs=[], keepalive=keepalive, base=base, host=host)


def map_block(desc: dict[str, Any], fds: list[int], device: torch.device) -> tuple[MappedArena, list[MappedArena]]:
    """Worker side: the block's memory (staged in before its first call) and every call's arena over it."""
    memory = _block_memory(desc, fds, device)
    assert memory.base is not None
    if memory.host is not None:
        pin(memory.host, memory)
    memory.stage_in()
    arenas = []
    for layout in desc["arenas"]:
        offset, nbytes = layout["offset"], layout["nbytes"]
        if offset < 0 or offset + nbytes > desc["nbytes"]:
            raise ValueError("an arena of the block lies outside its memory")
        arenas.append(_mapped(layout, _Base.__getitem__(memory.base, slice(offset, offset + nbytes)), None, memory))
        arenas[-1].reserve()
    return memory, arenas


class BlockArenas:
    """Verifier side: the arenas of one block's calls (DESIGN §5, timing), in one allocation: one memfd, one
    mapping in the worker, one staging copy each way, so every call's fresh inputs are in the worker's memory
    before the block's first call, and every call's outputs stay in its own slots until the block answers."""

    def __init__(self, draws: Sequence[Sequence[Any]], outputs: Sequence[tuple[tuple[int, ...], torch.dtype] | None],
                 device: torch.device, staged: bool = False) -> None:  # fmt: skip
        sizes = [-(-block_bytes(d, outputs) // _ALIGN) * _ALIGN for d in draws]
        self.offsets = [sum(sizes[:i]) for i in range(len(sizes))]
        self.nbytes = max(sum(sizes), _ALIGN)
        self.device = device
        self._fd: int | None = None
        self.host: torch.Tensor | None = None
        if staged:
            self._fd, self._mm, self.host = _memfd(self.nbytes)
            pin(self.host, self)
            self.base = torch.zeros(self.nbytes, dtype=torch.uint8, device=device)
        elif device.type == "cpu":
            self._fd, self._mm, self.base = _memfd(self.nbytes)
        else:
            self.base = torch.zeros(self.nbytes, dtype=torch.uint8, device=device)
        spans = zip(draws, self.offsets, sizes, strict=True)
        self.arenas = [Arena(d, outputs, self.base[o : o + n]) for d, o, n in spans]

    def descriptor(self) -> tuple[dict[str, Any], list[int]]:
        """What the worker needs to map the block, and the descriptor to pass with it."""
        desc: dict[str, Any] = {
            "nbytes": self.nbytes,
            "arenas": [{**a.layout(), "offset": o} for a, o in zip(self.arenas, self.offsets, strict=True)],
        }
        if self.host is not None:
            self.host.copy_(self.base)  # every call's draw, in one copy
            desc["staged"] = True
        if self._fd is not None:
            return desc, [self._fd]
        from torch.multiprocessing.reductions import reduce_tensor

        desc["cuda_ipc"] = reduce_tensor(self.base)
        return desc, []

    def arrived(self) -> None:
        """The worker has answered: a staged block takes back what its calls wrote."""
        if self.host is not None:
            self.base.copy_(self.host)

    def release_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def block_bytes(inputs: Sequence[Any], outputs: Sequence[tuple[tuple[int, ...], torch.dtype] | None]) -> int:
    """The bytes one call's arena takes in a block."""
    return _arena_layout(inputs, outputs)[2]
