"""What the signature rule compares of a launch's tensor argument: the sizes the problem fixes, not the data's.

The kernels rule (``_coverage.kernels_check``) asks the timed calls to launch what one correctness draw launched. A
launch's exact shapes are too much to ask of a plan that sizes a launch from the data: one launch per expert over
the rows routed to it (shape ``(count_e, H)``, red team rt13 FP2), one per sequence of a varlen batch; no timed call
then repeats a draw's exact set. So the rule compares each tensor argument's *kind*: its rank, element size, the
sizes the problem's own shapes fix (``fixed_sizes``) with every other size a wildcard, and its strides, a compact
one (the product of the later sizes, whatever they are) a wildcard too. What a wildcard lets vary is bounded by the
rules on volume (``_judge.scored_footprint``, ``_coverage.work_check``), not by this one.

Both functions run inside the worker's vault (``_provenance``): ``lib`` is its bound library, no global or builtin
is looked up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: A size the problem does not fix, or a compact stride, in a tensor argument's kind.
WILDCARD = -1


def fixed_sizes(lib: Any, tensors: Sequence[Any], numels: Sequence[int]) -> dict[int, bool]:
    """The sizes a problem's shapes fix, the same on every call of a workload: the products of consecutive
    dimensions of each input tensor (``tensors``: a correctness draw's) and the outputs' element counts
    (``numels``). Not 0 and 1, which a size drawn from the data takes too often (an expert routed no row, or one),
    nor the integers among the inputs (``local_expert_offset`` differs from call to call)."""
    found: dict[int, bool] = {}
    for n in numels:
        found[n] = True
    for t in tensors:
        sizes = lib.size(t)
        for i in lib.range(lib.len(sizes)):
            run = 1
            for n in sizes[i:]:
                run *= n
                found[run] = True
    found.pop(0, None)
    found.pop(1, None)
    return found


def launch_kind(lib: Any, t: Any, fixed: dict[int, bool]) -> tuple[Any, ...]:
    """Tensor argument ``t``'s kind (module docstring): (its sizes, each one ``fixed`` or ``WILDCARD``; its strides,
    each a compact one ``WILDCARD``, any other as it is; its element size). A non-compact stride stays exact: a layout
    value drawn from the data there (red team rt10 F3, answer values as strides) differs from the draws'."""
    sizes, strides = lib.size(t), lib.stride(t)
    kept: list[int] = []
    steps: list[int] = []
    compact = 1
    for i in lib.reversed(lib.range(lib.len(sizes))):
        n, st = sizes[i], strides[i]
        kept.append(n if n in fixed else WILDCARD)
        steps.append(WILDCARD if st == compact else st)
        compact *= n
    return lib.tuple(kept), lib.tuple(steps), lib.element_size(t)
