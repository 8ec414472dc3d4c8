"""Scatters that accumulate, as derived credit sees them (DESIGN §5, red team rt13 FP1).

``out.index_add_(0, rows, y)``, ``scatter_add``, ``scatter_reduce``, ``index_reduce``, a reducing ``scatter`` and an
indexed store told to accumulate (``index_put_(..., accumulate=True)``, ``put_``) combine each destination element
with the source elements indexed to it: a MoE's combine of its experts' rows into zeros. Such a result element is
the DSL's where at least one source element lands on it and every element it is combined from is the DSL's (credit
resting on no eager element), or is its destination's element of an eager constant fill (zeros: it carries nothing).
A destination element neither (an eager answer a DSL row is added into), or a source element that is not the DSL's
(an eager-made row, a problem input's), leaves the element eager. Where nothing lands, an out-of-place result is its
destination's element, with its credit; an in-place one is not written.

Which source elements land where is found by running the scatter's summing twin (same indices, same landing) on
labels: ``index_add`` for the index family, ``scatter_add`` for the scatter family, ``index_put`` (accumulating) and
``put`` for the stores. The vault reads an in-place scatter's destination before it runs (the provenance mode reports
every operator to the vault before it runs), since afterwards its touched elements hold the sum.
"""

from __future__ import annotations

from typing import Any

from mkbsim.verifier._eagerwork import ACCUMULATES

#: Accumulating scatter (the operator's name without a trailing ``_``) -> (position of its source argument, its
#: summing twin). The stores accumulate only when told to (``_eagerwork.ACCUMULATES`` in the recorded name), a plain
#: ``scatter`` only in its reducing overloads; the others always.
SCATTERS: dict[str, tuple[int, str]] = {
    "index_add": (3, "index_add"), "index_reduce": (3, "index_add"), "scatter_add": (3, "scatter_add"),
    "scatter_reduce": (3, "scatter_add"), "scatter": (3, "scatter_add"), "index_put": (2, "index_put"),
    "_index_put_impl": (2, "index_put"), "_unsafe_index_put": (2, "index_put"), "put": (2, "put"),
}  # fmt: skip


def accumulating(recorded: str, operator_name: str) -> tuple[int, str] | None:
    """(source position, summing twin) of a call recorded as ``recorded`` ("aten.index_add_.default", a store's
    name marked when it accumulates) of operator ``operator_name``; None when the call does not accumulate."""
    entry = SCATTERS.get(operator_name.rstrip("_"))
    if entry is None:
        return None
    if entry[1] in ("index_put", "put"):
        return entry if recorded.endswith(ACCUMULATES) else None
    if operator_name.rstrip("_") == "scatter":
        return entry if "reduce" in recorded.split(".", 2)[-1] else None
    return entry


def landed(lib: Any, twin: str, args: Any, dest: Any, source: Any) -> Any:
    """The summing twin of the scatter called with ``args``, run out of place on ``dest`` and ``source`` (labels of
    the destination's and the source's shapes, float64), the call's own dimension and indices. ``lib``: the vault's."""
    if twin == "index_add":
        return lib.index_add(dest, args[1], args[2], source)
    if twin == "scatter_add":
        return lib.scatter_add(dest, args[1], args[2], source)
    if twin == "index_put":
        return lib.index_put(dest, args[1], source, True)
    return lib.put(dest, args[1], source, True)
