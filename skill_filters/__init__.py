"""Skill filters (DESIGN §9): small plugins that rewrite a skill before it is transferred.

    import skill_filters
    f = skill_filters.get("drop_unsupported_closure+drop_agenda_handoff")
    result = f.apply(skill_text)        # result.text, result.removed (spans), result.reasons

A filter has a ``name``, a one-line ``description`` and ``apply(text) -> FilterResult``. The built-ins
below classify sentences with ``mkbsim.claims`` (the rubric of DESIGN §7) and drop whole categories.
``get("a+b")`` composes filters left to right. Every filter, built-ins included, is registered in the
entry point group ``mkbsim.skill_filters`` (the built-ins by mkbsim's own ``pyproject.toml``): the entry
point's name is the filter's name and it loads either a filter object or a zero-argument callable (a
class, a factory) that returns one. The lookup lives in ``mkbsim.plugins``, so mkbsim finds filters
without importing this package: it depends on mkbsim, never the reverse.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from mkbsim.claims import CATEGORIES, cut_categories
from mkbsim.plugins import (
    SEPARATOR,
    Composite,
    FilterResult,
    SkillFilter,
    Span,
    UnknownFilter,
)
from mkbsim.plugins import SKILL_FILTERS_GROUP as ENTRY_POINT_GROUP
from mkbsim.plugins import filter_names as names
from mkbsim.plugins import get_filter as get


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


#: What ``evidence_only`` keeps: statements backed by a measurement, a verification or a diagnosed failure.
EVIDENCE = frozenset(
    {"evidence_backed_finding", "verified_reformulation", "work_partitioning", "failure_diagnosis",
     "applicability_condition"}
)  # fmt: skip


def _dropping(name: str, description: str, categories: Collection[str]) -> CategoryFilter:
    return CategoryFilter(name, description, frozenset(categories))


# The built-ins, each registered under its name in pyproject.toml's [project.entry-points."mkbsim.skill_filters"].
IDENTITY = _dropping("identity", "control: the skill unchanged", ())
DROP_UNSUPPORTED_CLOSURE = _dropping(
    "drop_unsupported_closure", "drop sentences that rule out alternatives beyond the stated evidence",
    {"unsupported_closure"},
)  # fmt: skip
DROP_AGENDA_HANDOFF = _dropping("drop_agenda_handoff", "drop suggestions left for later work", {"agenda_handoff"})
EVIDENCE_ONLY = _dropping(
    "evidence_only", "keep only measured findings, verified reformulations, work splits, diagnosed failures and "
    "applicability conditions", set(CATEGORIES) - EVIDENCE,
)  # fmt: skip
DROP_DSL_RECIPES = _dropping("drop_dsl_recipes", "drop code- and API-level DSL detail", {"dsl_recipe_leak"})

__all__ = [
    "DROP_AGENDA_HANDOFF",
    "DROP_DSL_RECIPES",
    "DROP_UNSUPPORTED_CLOSURE",
    "ENTRY_POINT_GROUP",
    "EVIDENCE",
    "EVIDENCE_ONLY",
    "IDENTITY",
    "SEPARATOR",
    "CategoryFilter",
    "Composite",
    "FilterResult",
    "SkillFilter",
    "Span",
    "UnknownFilter",
    "get",
    "names",
]
