"""Skill writing: an attempt's conclusions rendered as natural-language sentences (never code).

Which sentences get written follows the profile's writing tendencies and what actually happened:
a measured pass becomes an evidence-backed finding (or an unmeasured claim for a writer with little
evidence discipline), a plan that failed or was never tried may be ruled out (unsupported closure) or
left as a suggestion (agenda handoff), a stop short of the budget may be declared good enough
(ambition capping). Each sentence's true rubric category is returned separately as a label.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from mkbsim.simulator._phrasing import FAILURE_CAUSES, RECIPES, TEMPLATES, plan_phrase
from mkbsim.simulator._profiles import AgentProfile
from mkbsim.simulator._rng import Draws

PARTITION_RATE = 0.6
CONDITION_RATE = 0.5  # times evidence discipline
QUESTION_RATE = 0.35
INHERIT_RATE = 0.5  # chance an adopted unmeasured claim of a read skill is repeated in the reader's own skill
ACCURATE_WITHIN = 1.5  # an unmeasured speedup estimate within this factor of the truth counts as accurate


@dataclass
class PlanRecord:
    """What the attempt knows (and, for labels, what is true) about one plan it considered or tried."""

    kind: str
    tries: int
    failure_causes: list[str]
    best_speedup: float | None  # measured, if it ever passed
    best_ms: float | None
    belief: float  # the agent's final log-speedup estimate
    true_speedup: float  # at the agent's median quality, in the attempt's DSL (labels only)


@dataclass
class Conclusions:
    problem: str
    dsl: str
    reformulation: str
    plans: dict[str, PlanRecord]
    best: str | None
    satisfied: bool  # stopped by choice (or by a read cap), not by the budget
    # adopted unmeasured sentences of a read skill, with their true category (labels only), to repeat
    inherited: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Sentence:
    section: int  # 0 findings, 1 failures, 2 open points, 3 DSL notes
    text: str
    category: str
    plan: str | None
    accurate: bool
    inherited: bool = False


_HEADINGS = (
    ("## What worked", "## What failed", "## Open points", "## DSL notes"),
    ("## Findings", "## Failures", "## Next", "## Notes on the DSL"),
)
_TITLES = ("# {problem}: notes from a {dsl} attempt", "# Skill for {problem} ({dsl} variant)")
_DSL_TITLES = {"cutedsl": "CuTe DSL", "tirx": "TIRx"}


def write_skill(c: Conclusions, profile: AgentProfile, draws: Draws) -> tuple[str, list[Sentence]]:
    """The skill text and its sentences with their true categories (in text order)."""
    sentences = list(_sentences(c, profile, draws, itertools.count()))
    sentences.sort(key=lambda s: s.section)  # stable: keeps the order of conclusions within a section
    return _render(c, sentences, draws), sentences


def _sentences(c: Conclusions, profile: AgentProfile, draws: Draws, n: Iterator[int]) -> Iterator[Sentence]:
    def u() -> float:
        return draws.uniform(1, next(n))

    def say(
        section: int, category: str, kind: str | None, accurate: bool, template_key: str = "", **fields: object
    ) -> Sentence:
        templates = TEMPLATES[template_key or category]
        template = templates[int(u() * len(templates))]
        plan_text = plan_phrase(kind, c.reformulation, int(u() * 3)) if kind else ""
        other = fields.pop("other", None)
        other_text = plan_phrase(str(other), c.reformulation, int(u() * 3)) if other else ""
        text = template.format(plan=plan_text, Plan=plan_text[:1].upper() + plan_text[1:], other=other_text, **fields)
        return Sentence(section, text, category, kind, accurate)

    records = c.plans
    best = records[c.best] if c.best else None
    if best is not None and best.best_speedup is not None:
        x, ms = f"{best.best_speedup:.1f}", f"{best.best_ms:.3f}"
        if best.kind == "reformulated" and u() < profile.reformulation:
            yield say(0, "verified_reformulation", best.kind, True, x=x, ms=ms)
        elif u() < profile.evidence:
            yield say(0, "evidence_backed_finding", best.kind, True, x=x, ms=ms)
        else:
            yield say(0, "unverified_claim", best.kind, True, x=x)
        if u() < PARTITION_RATE:
            yield say(0, "work_partitioning", best.kind, True)
    for r in records.values():
        if r is best:
            continue
        if r.best_speedup is not None and best is not None and best.best_speedup is not None:
            # passed, but slower than the kept kernel
            if u() < profile.evidence:
                yield say(0, "evidence_backed_finding", r.kind, True, "negative_finding",
                          x=f"{r.best_speedup:.1f}", y=f"{best.best_speedup:.1f}", other=best.kind)  # fmt: skip
            elif u() < profile.closure:
                yield say(2, "unsupported_closure", r.kind, r.true_speedup <= best.best_speedup)
            continue
        beats_best = best is None or best.best_speedup is None or r.true_speedup > best.best_speedup
        if r.tries:
            for cause in dict.fromkeys(r.failure_causes):
                if u() < profile.diagnosis:
                    text = FAILURE_CAUSES[cause][int(u() * len(FAILURE_CAUSES[cause]))]
                    yield say(1, "failure_diagnosis", r.kind, True, cause=text)
        elif math.exp(r.belief) <= (best.best_speedup if best and best.best_speedup else 0.0):
            continue  # never tried and not expected to beat what was kept: nothing to say
        if u() < profile.closure * (1.0 if r.tries else 0.5):
            yield say(2, "unsupported_closure", r.kind, not beats_best)
        elif u() < profile.agenda:
            yield say(2, "agenda_handoff", r.kind, beats_best)
        elif not r.tries and u() < 1.0 - profile.evidence:
            estimate = math.exp(r.belief)
            accurate = 1 / ACCURATE_WITHIN <= estimate / r.true_speedup <= ACCURATE_WITHIN
            yield say(2, "unverified_claim", r.kind, accurate, x=f"{estimate:.1f}")
        elif u() < QUESTION_RATE:
            yield say(2, "open_question", r.kind, True, other=c.best or "minimal_dsl")
    for text, category in c.inherited:
        if u() < INHERIT_RATE:
            yield Sentence(2, text, category, None, False, inherited=True)
    if c.satisfied and best is not None and best.best_speedup is not None and u() < profile.capping:
        upside = max((r.true_speedup for r in records.values()), default=0.0)
        yield say(2, "ambition_capping", best.kind, upside <= 1.25 * best.best_speedup, x=f"{best.best_speedup:.1f}")
    if best is not None and u() < CONDITION_RATE * profile.evidence:
        yield say(0, "applicability_condition", None, True)
    for i in range(2):
        if u() < profile.recipe * (1.0 if i == 0 else 0.5):
            recipes = RECIPES[c.dsl]
            yield Sentence(3, recipes[(int(u() * len(recipes)) + i) % len(recipes)], "dsl_recipe_leak", None, True)


def _render(c: Conclusions, sentences: list[Sentence], draws: Draws) -> str:
    headings = _HEADINGS[int(draws.uniform(2) * len(_HEADINGS))]
    bullets = draws.uniform(3) < 0.5
    title = _TITLES[int(draws.uniform(4) * len(_TITLES))].format(problem=c.problem, dsl=_DSL_TITLES[c.dsl])
    parts = [title, ""]
    for section, group in itertools.groupby(sentences, key=lambda s: s.section):
        texts = [s.text for s in group]
        parts += [headings[section], ""]
        parts += [f"- {t}" for t in texts] if bullets else [" ".join(texts)]
        parts.append("")
    return "\n".join(parts)
