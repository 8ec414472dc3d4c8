"""What mkbsim finds through entry points rather than imports (DESIGN §2: ``tui`` and ``skill_filters``
depend on mkbsim, never the reverse).

- ``mkbsim.tui``: the terminal UI, an entry point ``app`` naming ``run(store_path)``.
- ``mkbsim.skill_filters``: skill filters (DESIGN §9), each entry point named after its filter and
  loading a filter object or a zero-argument callable (a class, a factory) that returns one. The
  built-ins (package ``skill_filters``) are registered there by mkbsim's own distribution, third
  parties the same way. ``get_filter("a+b")`` composes filters left to right.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Protocol, runtime_checkable

from mkbsim.errors import UserError

TUI_GROUP = "mkbsim.tui"
SKILL_FILTERS_GROUP = "mkbsim.skill_filters"
SEPARATOR = "+"
#: The distribution whose filters are the built-ins (listed first, in the order it declares them).
_HOME = "mkbsim"


def tui_app() -> Callable[[Path], object]:
    """``run(store_path)`` of the installed terminal UI."""
    found = entry_points(group=TUI_GROUP, name="app")
    hint = "the TUI needs the tui extra: pip install 'mkbsim[tui]'"
    if not found:
        raise UserError(f"{hint}, and mkbsim installed with it (no {TUI_GROUP} entry point is registered)")
    try:
        run: Callable[[Path], object] = next(iter(found)).load()
    except ImportError as exc:
        raise UserError(f"{hint} (missing: {exc.name})") from None
    return run


@dataclass(frozen=True, slots=True)
class Span:
    """A removed piece of text: ``start``/``end`` index the text the removing filter was given."""

    start: int
    end: int
    text: str
    reason: str


@dataclass(frozen=True, slots=True)
class FilterResult:
    text: str
    removed: tuple[Span, ...] = ()
    reasons: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.removed)


@runtime_checkable
class SkillFilter(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    def apply(self, text: str) -> FilterResult: ...


class UnknownFilter(UserError, LookupError):
    def __init__(self, name: str, known: list[str]) -> None:
        if known:
            super().__init__(f"unknown skill filter {name!r} (known: {', '.join(known)})")
        else:  # not even the built-ins: mkbsim's own entry points are not installed
            super().__init__(f"unknown skill filter {name!r}: no skill filter is registered in the entry point "
                             f"group {SKILL_FILTERS_GROUP} (install mkbsim, e.g. pip install -e .)")  # fmt: skip


@dataclass(frozen=True)
class Composite:
    """Filters applied left to right; each part's spans index the text that part was given."""

    parts: tuple[SkillFilter, ...]

    @property
    def name(self) -> str:
        return SEPARATOR.join(p.name for p in self.parts)

    @property
    def description(self) -> str:
        return "; then ".join(p.description for p in self.parts)

    def apply(self, text: str) -> FilterResult:
        removed: list[Span] = []
        reasons: list[str] = []
        for part in self.parts:
            result = part.apply(text)
            text = result.text
            removed += result.removed
            reasons += result.reasons
        return FilterResult(text, tuple(removed), tuple(reasons))


def _registered() -> dict[str, EntryPoint]:
    """Every filter's entry point by name: the built-ins first, then the others by name (a built-in's
    name cannot be taken by a plugin)."""
    points = list(entry_points(group=SKILL_FILTERS_GROUP))
    home = [p for p in points if p.dist is not None and p.dist.name == _HOME]
    others = sorted((p for p in points if p not in home), key=lambda p: p.name)
    found: dict[str, EntryPoint] = {}
    for point in [*home, *others]:
        found.setdefault(point.name, point)
    return found


def filter_names() -> list[str]:
    """Every single filter's name: the built-ins, then the plugins (sorted)."""
    return list(_registered())


def get_filter(name: str) -> SkillFilter:
    """The filter called ``name``; ``"a+b"`` composes ``a`` then ``b``."""
    parts = [p.strip() for p in name.split(SEPARATOR)]
    if len(parts) > 1:
        return Composite(tuple(get_filter(p) for p in parts))
    registered = _registered()
    if name not in registered:
        raise UnknownFilter(name, list(registered))
    try:
        loaded = registered[name].load()
    except Exception as exc:  # a third party's module: whatever it raises, the filter is unusable
        raise UserError(f"the skill filter plugin {name!r} failed to load: {exc}") from None
    # a class has its methods as attributes too: only an instance is a filter
    candidate = loaded if isinstance(loaded, SkillFilter) and not isinstance(loaded, type) else loaded()
    if not isinstance(candidate, SkillFilter):
        raise UserError(f"the skill filter plugin {name!r} loads {candidate!r}, which has no name/description/apply")
    return candidate
