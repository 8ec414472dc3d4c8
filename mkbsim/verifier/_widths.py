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
after it is judged by the bytes it came from). Data of a dtype whose significand is wider than float32's is priced at
that precision (``PRECISION``: narrow data packed into its lanes by arithmetic, not by a view). A storage's record
lasts as long as the storage (a new one at a freed one's address holds its own data).

The functions take ``lib``, their namespace of callables bound before the submission loads (``bound``): inside the
worker they look up no name the submission could have replaced.
"""

from __future__ import annotations

import types
import weakref
from typing import Any

import torch

from mkbsim.verifier import _eagerwork

#: A storage's address -> the element size of the data it holds, and a weak reference to the storage that entry is of
#: (an entry whose storage has died is of nothing: a new storage may sit where it was).
Made = dict[int, tuple[int, Any]]

#: Real operations a complex call does for each real scalar of its elements, by how it is priced: a product four real
#: multiply-adds for each one (two scalars: twice); any other computing operator as a multiplication, four real
#: multiplications and two additions an element (three times: ``addcmul``, ``lerp``, ``prod`` multiply too, red team
#: rt28b F2); data movement none. A Fourier transform's price counts its complex arithmetic already
#: (``_eagerwork.FFTS``).
COMPLEX_WORK = {"product": 2, "elementwise": 3, "bound": 3}
#: A computing call on data of its own dtype whose significand is wider than float32's (what references compute in) is
#: priced as the float32 work its hardware does: an element operation by the significands' ratio (53/24: an adder's
#: width), a product by its square (a multiplier's area; a 64-bit integer's 63 bits against 24). Narrow data packed by
#: arithmetic into a wide significand's lanes is work done that many times over (red team rt28b F1: four columns of
#: e2m1 block sums, 13 bits each, in one float64, four output columns of p59's GEMM for each one priced); an integer
#: product at least as many times as it holds lanes of 10 bits, what products of two e2m1 codes and their sum over a
#: pair need (red team rt29b F3: p59's GEMM in int32 with two and three weight columns a lane, priced once). A reference
#: computing its products in float64 is taken at its useful FLOPs all the same (``reference_work``'s padding).
#: Integer element work is priced as the GPU does it: 32-bit integer instructions issue at half float32's rate (the
#: H100/H200's 64 integer lanes an SM a clock against 128), and a 64-bit element operation takes two or more of them
#: (an add with carry, a compare of both halves; a multiply four): int32 at 2, int64 at 3, so that integer lanes of
#: 16 bits (four in an int64, two in an int32) buy little (red team rt30a F2: p59's GEMM as a broadcast int64 ``mul``
#: and ``sum`` over four weight columns a lane, partial 0.28 where its one-column twin was decorative 0.85).
PRECISION = {
    **dict.fromkeys((("product", torch.float64), ("product", torch.complex128)), 5),
    **dict.fromkeys((("product", torch.int32), ("product", torch.uint32)), 3),
    **dict.fromkeys((("product", torch.int64), ("product", torch.uint64)), 7),
    **dict.fromkeys((("elementwise", torch.float64), ("elementwise", torch.complex128), ("bound", torch.float64),
                     ("bound", torch.complex128)), 2),
    **dict.fromkeys((("elementwise", torch.int32), ("elementwise", torch.uint32), ("bound", torch.int32),
                     ("bound", torch.uint32)), 2),
    **dict.fromkeys((("elementwise", torch.int64), ("elementwise", torch.uint64), ("bound", torch.int64),
                     ("bound", torch.uint64)), 3),
    # an element multiplication or division (``MULTIPLYING``) as an integer product (a multiplier's area; a division
    # is several), a wide float's as its other element work
    **dict.fromkeys((("multiply", torch.int32), ("multiply", torch.uint32)), 3),
    **dict.fromkeys((("multiply", torch.int64), ("multiply", torch.uint64)), 7),
    **dict.fromkeys((("multiply", torch.float64), ("multiply", torch.complex128)), 2),
}  # fmt: skip
#: Element operators that multiply or divide (base names), priced at ``PRECISION``'s "multiply".
MULTIPLYING = frozenset(("mul", "multiply", "addcmul", "addcdiv", "prod", "cumprod", "pow", "square", "div", "divide",
                         "true_divide", "floor_divide", "remainder", "fmod", "lerp", "xlogy",
                         "reciprocal"))  # fmt: skip


def address(lib: Any, t: Any) -> int:
    """The address of ``t``'s storage (every view of one storage shares it)."""
    return lib.data_ptr(t) - lib.storage_offset(t) * lib.element_size(t)


def held(lib: Any, made: Made, t: Any) -> int:
    """The element size of the data ``t``'s storage holds (``made``), its own where nothing is known of it."""
    entry = made.get(lib.address(lib, t))
    return entry[0] if entry is not None and entry[1]() is not None else lib.element_size(t)


def widened(lib: Any, made: Made, name: str, tensors: Any) -> tuple[int, int]:
    """(how many times the work of a call of operator ``name`` ("aten.op.overload") on ``tensors`` its per-element price
    counts, 1 where nothing below applies; the narrowest data an integer tensor among them is wider than, 0 where none
    is). For each tensor, how many of its data (``held``) one real scalar of it holds (a complex element is two
    scalars) or, where one scalar holds one datum or less, its dtype's precision (``PRECISION``); the largest of these,
    times two scalars and a complex call's real operations (``COMPLEX_WORK``) where a tensor is complex."""
    how = lib.category(name)
    # a lookup evaluating the function its table holds (``_eagerwork.EVALUATED``, ``TABLED``) is element work, priced
    # as a multiplication at the table's precision: what computing it would cost (red team rt25b's p26 tables of
    # ``p // bs`` and ``b * bs`` in int64, looked up where its twin divides and multiplies)
    evaluates = lib.evaluates(lib, name)
    if evaluates:
        how = "elementwise"
    base = lib.base_of(name)
    counted = base not in lib.ffts  # (a transform's price counts its complex arithmetic)
    precise = "multiply" if evaluates or (how == "elementwise" and base in lib.multiplying) else how
    ratio, complex_seen, lanes = 1, False, 0
    for t in tensors:
        size = lib.element_size(t)
        data = lib.held(lib, made, t)
        scalar = size
        if counted and lib.is_complex(t):
            scalar, complex_seen = size // 2, True
        if data < scalar:  # several data a scalar: a view wider than what it holds
            ratio = lib.max(ratio, scalar // data)
            if lib.dtype_of(t) in lib.integers:
                lanes = data if lanes == 0 else lib.min(lanes, data)
        else:  # a scalar's worth of data, or more: computed in the dtype's precision
            ratio = lib.max(ratio, lib.precision.get((precise, lib.dtype_of(t)), 1))
    return (ratio * 2 * lib.complex_work.get(how, 1) if complex_seen else ratio), lanes


def evaluates(lib: Any, name: str) -> bool:
    """Whether a call of ``name`` (its recorded name, marks included) is a lookup evaluating the function its table
    holds (``_eagerwork.EVALUATED``, ``TABLED``)."""
    return lib.category(name) == "movement" and (lib.evaluated in name or lib.tabled in name)


def fresh(lib: Any, given: Any, outs: Any) -> list[Any]:
    """The results of an operator (``outs``) in storages none of the tensors it was given (``given``) is in: new data,
    not a view, an in-place result or an ``out=`` destination."""
    held = {lib.address(lib, u) for u in given}
    return [t for t in outs if lib.address(lib, t) not in held]


def made_as(lib: Any, made: Made, tensors: Any, lanes: int = 0) -> None:
    """``tensors`` (problem inputs, an operator's new results) hold data of their own element size; an integer result
    of an operator that read integer data ``lanes`` bytes wide through a wider view (``widened``) holds that data."""
    for t in tensors:
        size = lib.element_size(t)
        kept = 0 < lanes < size and lib.dtype_of(t) in lib.integers
        made[lib.address(lib, t)] = (lanes if kept else size, lib.ref(lib.storage(t)))


def narrowed(lib: Any, made: Made, written: Any) -> None:
    """Storages written through a view narrower than the data they held (``copy_`` of int16 values into an int16 view
    of an int64 buffer) hold data that narrow from then on: red team rt30a F2 packed four 16-bit lanes into each int64
    of a ``zeros`` buffer so, recorded as 8-byte data, and its int64 arithmetic was priced once an element."""
    for t in written:
        size = lib.element_size(t)
        if size < lib.held(lib, made, t):
            made[lib.address(lib, t)] = (size, lib.ref(lib.storage(t)))


def priced(lib: Any, made: Made, name: str, given: Any, outs: Any) -> int:
    """How many times its per-element price a call of operator ``name`` on ``given`` returning ``outs`` counts
    (``widened``); its new results' data recorded (``made_as``), and what it wrote in place through a narrower view
    (``narrowed``)."""
    # a lookup evaluating a function is priced at its results' precision (its table's values), not its indices'
    ratio, lanes = lib.widened(lib, made, name, outs if lib.evaluates(lib, name) else [*given, *outs])
    new = lib.fresh(lib, given, outs)
    lib.made_as(lib, made, new, lanes)
    lib.narrowed(lib, made, [t for t in outs if not lib.any(t is u for u in new)])
    return ratio


def bound() -> types.SimpleNamespace:
    """The callables and constants the functions above use, bound before the submission loads."""
    base = torch._C.TensorBase
    return types.SimpleNamespace(
        data_ptr=base.data_ptr, storage_offset=base.storage_offset, element_size=base.element_size,
        is_complex=base.is_complex, dtype_of=base.__dict__["dtype"].__get__, min=min, max=max,
        integers=frozenset((torch.int8, torch.uint8, torch.int16, torch.uint16, torch.int32, torch.uint32, torch.int64,
                            torch.uint64)),
        complex_work=COMPLEX_WORK, precision=PRECISION, multiplying=MULTIPLYING, category=_eagerwork.category,
        base_of=_eagerwork.base_of, evaluated=_eagerwork.EVALUATED, tabled=_eagerwork.TABLED,
        ffts=frozenset(_eagerwork.FFTS), storage=base.untyped_storage, ref=weakref.ref, address=address, held=held,
        widened=widened, evaluates=evaluates, fresh=fresh, made_as=made_as, narrowed=narrowed, priced=priced, any=any,
    )  # fmt: skip
