"""How an eager lookup is priced: one judgement for the submission's vault and for the reference's recorder.

A lookup (``_eagerwork.LOOKUPS``) moves elements, unless it evaluates a function by its table: it wrote
``LOOKUP_REPLICATION`` times what stands behind what it read (the fewest of the table's elements, what the table was
made from, and the table positions it read), alone or together with the call's other lookups into the same table or
from the same root (README "Eager work", red team rt27). A table of one value or of its own indices moves whatever
its replication (red team rt27's false positive: p26's ``idx_mapping[repeat_interleave(arange(b), lens)]``).

Both sides price a lookup by these functions, so that the same glue costs the same in the reference and in a
submission (red team rt27b: a lookup of the reference's own glue judged with the call's other lookups in a submission,
by its size alone in the reference, could put an honest hybrid's share above the reference's). The functions take
``lib``, their namespace of callables bound before the submission loads (``bound``): inside the worker they look up no
name the submission could have replaced.
"""

from __future__ import annotations

import types
from typing import Any

import torch

from mkbsim.verifier import _eagerwork

#: Table positions a lookup's labels are made for at most (``positions_read``: 128 MB of int64 labels); past it the
#: positions a lookup read are not counted, nor kept for the call's lookups together.
LABELS_CAP = 1 << 24


def span(lib: Any, t: Any) -> tuple[int, int]:
    """The byte range [start, end) of ``t``'s elements in memory."""
    start = lib.data_ptr(t)
    if lib.numel(t) == 0:
        return start, start
    extent = 1
    for n, st in lib.zip(lib.size(t), lib.stride(t)):
        extent += (n - 1) * st
    return start, start + extent * lib.element_size(t)


def trivial(lib: Any, table: Any) -> bool:
    """Whether ``table``'s elements (in order) are all one value, or its own indices 0, 1, 2, ..."""
    flat = lib.reshape(table, (-1,))
    if lib.bool(lib.all_of(lib.eq(flat, flat[0]))):
        return True
    try:
        return lib.equal(flat, lib.arange(lib.numel(flat), dtype=lib.dtype_of(flat), device=lib.device_of(flat)))
    except lib.BaseException:  # a dtype with no range (bool)
        return False


def positions_read(lib: Any, operator_name: str, table: Any, args: Any, kwargs: Any, span: tuple[int, int]) -> Any:
    """The distinct storage positions (element offsets from the table's first byte; ``span``: its byte range) a lookup
    read: the lookup done again over labels of its table's positions; None past ``LABELS_CAP`` positions or for an
    overload the functional form does not take."""
    lo, hi = span
    width = lib.max(lib.element_size(table), 1)
    if (hi - lo) // width > lib.labels_cap:
        return None
    whole = lib.arange((hi - lo) // width, dtype=lib.int64, device=lib.device_of(table))
    labels = lib.as_strided(whole, lib.tuple(lib.size(table)), lib.tuple(lib.stride(table)), 0)
    try:
        picked = lib.lookup_of[operator_name](labels, *args[1:], **{k: v for k, v in kwargs.items() if k != "out"})
    except lib.BaseException:
        return None
    return lib.unique(lib.reshape(picked, (-1,)))[0]


def judged(
    lib: Any,
    table: Any,
    read: Any,
    behind: dict[Any, int] | None,
    span: tuple[int, int],
    written: int,
    seen: dict[Any, Any],
) -> str:
    """A lookup's kind (``_eagerwork.EVALUATED``, ``MOVED`` or "": priced by its table's size) from what it read:
    ``read``, the positions (``positions_read``, or None); ``behind``, the roots its table was made from and their
    elements (None where not known; {}: made from nothing); ``span``, the table's byte range; ``seen``, the call's
    lookups so far, keyed by table span and by root ([elements written, positions read]), updated with this one's."""
    fewest = lib.numel(table) if behind is None else lib.min(lib.numel(table), lib.total(behind.values()))
    if read is not None:
        fewest = lib.min(fewest, lib.numel(read))
    evaluates = lib.replication * fewest <= written
    for key, elements in ((span, None), *(behind or {}).items()):
        so_far = seen.setdefault(key, [0, None])
        so_far[0] += written
        if elements is None:  # the table's own positions, all its lookups together
            if read is not None:
                union = read if so_far[1] is None else lib.unique(lib.cat([so_far[1], read]))[0]
                so_far[1] = union if lib.numel(union) <= lib.labels_cap else so_far[1]
            elements = lib.numel(so_far[1]) if so_far[1] is not None else lib.numel(table)
        evaluates = evaluates or lib.replication * elements <= so_far[0]
    if evaluates or lib.replication * lib.numel(table) <= written:  # (``trivial`` reads the whole table)
        return lib.moved_lookup if lib.trivial(lib, table) else (lib.evaluated_lookup if evaluates else "")
    return ""


def bound() -> types.SimpleNamespace:
    """The callables and constants the functions above use, bound before the submission loads."""
    fns = torch._C._VariableFunctions
    base = torch._C.TensorBase
    return types.SimpleNamespace(
        data_ptr=base.data_ptr, numel=base.numel, size=base.size, stride=base.stride, element_size=base.element_size,
        reshape=base.reshape, as_strided=base.as_strided, all_of=base.all, eq=base.eq, equal=fns.equal,
        arange=fns.arange, unique=fns._unique2, cat=fns.cat, dtype_of=base.__dict__["dtype"].__get__,
        device_of=base.__dict__["device"].__get__, int64=torch.int64, zip=zip, bool=bool, tuple=tuple, min=min,
        max=max, total=sum, BaseException=BaseException, labels_cap=LABELS_CAP,
        replication=_eagerwork.LOOKUP_REPLICATION, moved_lookup=_eagerwork.MOVED, evaluated_lookup=_eagerwork.EVALUATED,
        lookup_of={"index": torch.ops.aten.index.Tensor, "_unsafe_index": torch.ops.aten._unsafe_index.Tensor,
                   "index_select": torch.ops.aten.index_select.default, "gather": torch.ops.aten.gather.default,
                   "take": torch.ops.aten.take.default, "embedding": torch.ops.aten.embedding.default},
        span=span, trivial=trivial, positions_read=positions_read, judged=judged,
    )  # fmt: skip
