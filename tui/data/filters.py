"""Skill filters as the TUI uses them: list, preview on one skill, count changes over a campaign, launch
a filter test. Filters come from the ``skill_filters`` package (DESIGN §9: ``skill_filters.get(name)``,
``filter.apply(text)`` → a result whose ``.text`` is the filtered skill, with removed spans and reasons);
the package lists its filters with ``skill_filters.names()``.
"""

from __future__ import annotations

import difflib
import json
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

#: A filter as the TUI calls it: skill text → a result with ``.text`` (and optionally ``.reasons``).
FilterFunction = Callable[[str], Any]


@dataclass(frozen=True)
class FilterPreview:
    name: str
    original: str
    text: str
    reasons: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return self.text != self.original


@dataclass(frozen=True)
class DiffPiece:
    """A run of words of the diff: kept, removed from the original, or added by the filter."""

    kind: str  # "kept" | "removed" | "added"
    text: str


class FilterCatalog:
    """The filters a session can preview, by name. ``unavailable`` says why there are none, if none;
    ``can_launch`` whether a filter test can be started (this mkbsim has `mkbsim filter-test`)."""

    def __init__(
        self, filters: Mapping[str, FilterFunction], unavailable: str | None = None, *, can_launch: bool = False
    ) -> None:
        self._filters = dict(filters)
        self.unavailable = unavailable
        self.can_launch = can_launch

    @classmethod
    def from_skill_filters(cls) -> FilterCatalog:
        """The installed ``skill_filters`` (built-ins and entry-point plugins); tests run `mkbsim filter-test`."""
        import skill_filters

        return cls({name: skill_filters.get(name).apply for name in skill_filters.names()}, can_launch=True)

    def names(self) -> list[str]:
        return sorted(self._filters)

    def apply(self, name: str, text: str) -> FilterPreview:
        result = self._filters[name](text)
        reasons = tuple(str(r) for r in getattr(result, "reasons", ()) or ())
        return FilterPreview(name, text, str(result.text), reasons)


_TOKEN = re.compile(r"\s+|[^\s]+")


def word_diff(original: str, filtered: str) -> list[DiffPiece]:
    """A word-level diff (whitespace kept) of the filter's output against the skill it was given."""
    a, b = _TOKEN.findall(original), _TOKEN.findall(filtered)
    pieces: list[DiffPiece] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            pieces.append(DiffPiece("kept", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            pieces.append(DiffPiece("removed", "".join(a[i1:i2])))
        if j2 > j1:
            pieces.append(DiffPiece("added", "".join(b[j1:j2])))
    return pieces


def launch_filter_test(
    store: Path, campaign_id: str, filter_name: str, result: IO[bytes], log: IO[bytes]
) -> subprocess.Popen[bytes]:
    """Start ``mkbsim filter-test --format json`` in its own process (and session, so closing the TUI leaves it
    running): the report's JSON to ``result``, progress and errors to ``log``."""
    command = [sys.executable, "-m", "mkbsim", "filter-test", "--store", str(store), "--campaign", campaign_id,
               "--filter", filter_name, "--format", "json"]  # fmt: skip
    return subprocess.Popen(command, stdout=result, stderr=log, start_new_session=True)


@dataclass(frozen=True)
class FilterTestResult:
    """What ``mkbsim filter-test --format json`` reported: per model × direction (and pooled), unfiltered vs
    filtered lift on the shared comparisons, with paired tests."""

    filter_name: str
    base_campaign_id: str
    campaign_id: str
    cells: tuple[dict[str, Any], ...]

    @classmethod
    def parse(cls, text: str) -> FilterTestResult:
        """The report in ``text``; ``ValueError`` when it is not one."""
        try:
            data = json.loads(text)
            return cls(str(data["filter"]), str(data["base_campaign_id"]), str(data["campaign_id"]),
                       tuple(dict(cell) for cell in data["cells"]))  # fmt: skip
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"not a filter-test report: {exc}") from None
