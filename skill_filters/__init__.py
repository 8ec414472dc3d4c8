"""Skill filters (DESIGN §9): small plugins that rewrite a skill before it is transferred.

    import skill_filters
    f = skill_filters.get("drop_unsupported_closure+drop_agenda_handoff")
    result = f.apply(skill_text)        # result.text, result.removed (spans), result.reasons

A filter has a ``name``, a one-line ``description`` and ``apply(text) -> FilterResult``. The built-ins
classify sentences with ``mkbsim.claims`` (the rubric of DESIGN §7) and drop whole categories.
``get("a+b")`` composes filters left to right. Third parties register a filter in the entry point
group ``mkbsim.skill_filters``: the entry point's name is the filter's name and it loads either a
filter object or a zero-argument callable (a class, a factory) that returns one.

This package depends on mkbsim, never the reverse: mkbsim code that needs a filter takes a callable.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Protocol, runtime_checkable

from mkbsim.claims import cut_categories
from mkbsim.errors import UserError

ENTRY_POINT_GROUP = "mkbsim.skill_filters"
SEPARATOR = "+"


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
    def __init__(self, name: str, known: Iterable[str]) -> None:
        super().__init__(f"unknown skill filter {name!r} (known: {', '.join(known)})")


@dataclass(frozen=True)
class CategoryFilter:
    """Drops every sentence that ``mkbsim.claims`` classifies into one of ``categories`` (none: identity)."""

    name: str
    description: str
    categories: frozenset[str]

    def apply(self, text: str) -> FilterResult:
        if not self.categories:
            return FilterResult(text)
        filtered, claims = cut_categories(text, self.categories)
        removed = tuple(Span(c.start, c.end, text[c.start : c.end], c.category) for c in claims)
        reasons = tuple(f"{self.name}: dropped {c.category} sentence: {c.text!r}" for c in claims)
        return FilterResult(filtered, removed, reasons)


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


#: What ``evidence_only`` keeps: statements backed by a measurement, a verification or a diagnosed failure.
EVIDENCE = frozenset(
    {"evidence_backed_finding", "verified_reformulation", "work_partitioning", "failure_diagnosis",
     "applicability_condition"}
)  # fmt: skip


def _dropping(name: str, description: str, categories: Collection[str]) -> CategoryFilter:
    return CategoryFilter(name, description, frozenset(categories))


def _builtins() -> dict[str, SkillFilter]:
    from mkbsim.claims import CATEGORIES

    filters = [
        _dropping("identity", "control: the skill unchanged", ()),
        _dropping("drop_unsupported_closure", "drop sentences that rule out alternatives beyond the stated evidence",
                  {"unsupported_closure"}),
        _dropping("drop_agenda_handoff", "drop suggestions left for later work", {"agenda_handoff"}),
        _dropping("evidence_only", "keep only measured findings, verified reformulations, work splits, "
                  "diagnosed failures and applicability conditions", set(CATEGORIES) - EVIDENCE),
        _dropping("drop_dsl_recipes", "drop code- and API-level DSL detail", {"dsl_recipe_leak"}),
    ]  # fmt: skip
    return {f.name: f for f in filters}


def _plugins() -> dict[str, Callable[[], SkillFilter]]:
    return {ep.name: ep.load for ep in entry_points(group=ENTRY_POINT_GROUP)}


def names() -> list[str]:
    """Every single filter's name: the built-ins, then the entry-point plugins (sorted)."""
    builtins = _builtins()
    return [*builtins, *sorted(set(_plugins()) - set(builtins))]


def get(name: str) -> SkillFilter:
    """The filter called ``name``; ``"a+b"`` composes ``a`` then ``b``."""
    parts = [p.strip() for p in name.split(SEPARATOR)]
    if len(parts) > 1:
        return Composite(tuple(get(p) for p in parts))
    builtins = _builtins()
    if name in builtins:
        return builtins[name]
    plugins = _plugins()
    if name not in plugins:
        raise UnknownFilter(name, names())
    loaded = plugins[name]()
    # a class has its methods as attributes too: only an instance is a filter
    candidate = loaded if isinstance(loaded, SkillFilter) and not isinstance(loaded, type) else loaded()
    if not isinstance(candidate, SkillFilter):
        raise UserError(f"the skill filter plugin {name!r} loads {candidate!r}, which has no name/description/apply")
    return candidate


__all__ = [
    "ENTRY_POINT_GROUP",
    "EVIDENCE",
    "CategoryFilter",
    "Composite",
    "FilterResult",
    "SkillFilter",
    "Span",
    "UnknownFilter",
    "get",
    "names",
]
