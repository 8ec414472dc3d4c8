"""Eager work on data seen through a wider dtype is priced by the data it holds: one judgement for the submission's
vault and the reference's recorder.

Eager operators are priced per element (``_eagerwork.op_work``). An element of a dtype-reinterpreting view
(``x.view(torch.complex128)`` of uint8 data) holds several of the data's own elements, and a complex element two real
scalars: p25's block copy through complex128 views moved 16 bytes an element, priced at a sixteenth of the reference's
copy; RMSNorm, RoPE and GEMMs on complex views of real pairs squared, rotated and multiplied two or four real values an
operation and passed as partial plans at half their eager twins' share or less (red team rt28). Each storage's data
keeps the element size it was made with (``made_as``: a problem input's, an eager result's own); an operator reading or
writing a tensor wider than the data it holds is priced that many times over (``widened``; ``_eagerwork.WIDER`` on its
recorded name), and a complex multiplication or product as the real ones it does (``COMPLEX_WORK``). An integer result
made from an integer view wider than its data holds the narrow data still (``x.view(torch.int64).clone()``, then
arithmetic on eight bytes an element: the lanes of a register); a float result holds data of its own width (a cast of
packed scale bytes, ``x.contiguous().view(torch.float32)``, is what p18's and p24's references do: no float operation
after it is judged by the bytes it came from).

The functions take ``lib``, their namespace of callables bound before the submission loads (``bound``): inside the
worker they look up no name the submission could have replaced.
"""

from __future__ import annotations

import types
from typing import Any

import torch

from mkbsim.verifier import _eagerwork

#: Real operations a complex call does for each real scalar of its elements, by how it is priced: a product four real
#: multiply-adds for each one (two scalars: twice); any other computing operator as a multiplication, four real
#: multiplications and two additions an element (three times: ``addcmul``, ``lerp``, ``prod`` multiply too, red team
#: rt28b F2); data movement none. A Fourier transform's price counts its complex arithmetic already
#: (``_eagerwork.FFTS``).
COMPLEX_WORK = {"product": 2, "elementwise": 3, "bound": 3}


def address(lib: Any, t: Any) -> int:
    """The address of ``t``'s storage (every view of one storage shares it)."""
    return lib.data_ptr(t) - lib.storage_offset(t) * lib.element_size(t)


def widened(lib: Any, made: dict[int, int], name: str, tensors: Any) -> tuple[int, int]:
    """(how many times the work of a call of operator ``name`` ("aten.op.overload") on ``tensors`` its per-element price
    counts: the widest tensor's element size over the data it holds (``made``: a storage's address -> its data's
    element size; a complex element holds two real scalars), times a complex call's real operations
    (``COMPLEX_WORK``), 1 where no tensor is wider than its data; the narrowest data an integer tensor among them is
    wider than, 0 where none is)."""
    how = lib.category(name)
    counted = lib.base_of(name) not in lib.ffts  # (a transform's price counts its complex arithmetic)
    ratio, complex_seen, lanes = 1, False, 0
    for t in tensors:
        size = lib.element_size(t)
        held = made.get(lib.address(lib, t), size)
        if counted and lib.is_complex(t):
            held, complex_seen = lib.min(held, size // 2), True
        if 0 < held < size:
            ratio = lib.max(ratio, size // held)
            if lib.dtype_of(t) in lib.integers:
                lanes = held if lanes == 0 else lib.min(lanes, held)
    return (ratio * lib.complex_work.get(how, 1) if complex_seen else ratio), lanes


def fresh(lib: Any, given: Any, outs: Any) -> list[Any]:
    """The results of an operator (``outs``) in storages none of the tensors it was given (``given``) is in: new data,
    not a view, an in-place result or an ``out=`` destination."""
    held = {lib.address(lib, u) for u in given}
    return [t for t in outs if lib.address(lib, t) not in held]


def made_as(lib: Any, made: dict[int, int], tensors: Any, lanes: int = 0) -> None:
    """``tensors`` (problem inputs, an operator's new results) hold data of their own element size; an integer result
    of an operator that read integer data ``lanes`` bytes wide through a wider view (``widened``) holds that data."""
    for t in tensors:
        size = lib.element_size(t)
        kept = 0 < lanes < size and lib.dtype_of(t) in lib.integers
        made[lib.address(lib, t)] = lanes if kept else size


def bound() -> types.SimpleNamespace:
    """The callables and constants the functions above use, bound before the submission loads."""
    base = torch._C.TensorBase
    return types.SimpleNamespace(
        data_ptr=base.data_ptr, storage_offset=base.storage_offset, element_size=base.element_size,
        is_complex=base.is_complex, dtype_of=base.__dict__["dtype"].__get__, min=min, max=max,
        integers=frozenset((torch.int8, torch.uint8, torch.int16, torch.uint16, torch.int32, torch.uint32, torch.int64,
                            torch.uint64)),
        complex_work=COMPLEX_WORK, category=_eagerwork.category, base_of=_eagerwork.base_of,
        ffts=frozenset(_eagerwork.FFTS), address=address, widened=widened, fresh=fresh, made_as=made_as,
    )  # fmt: skip
