"""Plain-text tables and number formats for the skills commands."""

from __future__ import annotations

from collections.abc import Sequence


def render(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
              for r in rows]  # fmt: skip
    return "\n".join(lines) + "\n"


def signed(x: float | None) -> str:
    return "–" if x is None else f"{x:+.1%}"


def share(x: float | None) -> str:
    return "–" if x is None else f"{x:.0%}"


def pvalue(x: float | None) -> str:
    return "–" if x is None else "<0.001" if x < 0.001 else f"{x:.3g}"


def number(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def points(x: float | None) -> str:
    """A difference already in percentage points."""
    return "–" if x is None else f"{x:+.1f}"


def interval(ci: Sequence[float] | None, *, percent: bool = False, digits: int = 1) -> str:
    """``[lo, hi]``: shares shown as percentages with ``percent``, else as they are."""
    if ci is None:
        return "–"
    factor = 100.0 if percent else 1.0
    return "[" + ", ".join(f"{v * factor:.{0 if percent else digits}f}" for v in ci) + "]"
