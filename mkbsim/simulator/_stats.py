"""Statistics of simulated campaigns, scored by the metric rules of ``mkbsim.metrics``.

Calibration, the shape checks and tests need them without an event store, so simulated attempts
(``simulate``) are turned into the metrics package's ``TransferAttempt`` records and paired with its
``pair_slot`` — one definition of r, standing and the aggregates for simulated and stored campaigns alike.
Only plain treatments count here (control arms have their own report). What a labeler would give a stored
campaign — follow levels, failure classes, rubric categories — comes from the simulator's ground-truth
labels in the attempts' events.

Every statistic is named ``kind.key`` (``paired_lift.cutedsl2tirx``, ``family_lift.cutedsl2tirx.moe``);
``statistic_names()`` lists them all, and targets (``_calibrate``) use exactly these names.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from mkbsim.campaigns import AttemptOutcome, PlannedAttempt
from mkbsim.catalog import FAMILIES
from mkbsim.claims import CATEGORIES
from mkbsim.metrics import (
    DIRECTIONS,
    STANDINGS,
    Comparison,
    TransferAttempt,
    geometric_mean,
    harm_rate,
    help_rate,
    pair_slot,
    paired_lift,
    reverse_direction,
)

DSLS = ("cutedsl", "tirx")
FAILURE_CLASSES = (
    "search_truncation", "unverified_adoption", "faulty_execution", "toolchain_friction",
    "budget_or_artifact_mismanagement", "rule_and_precision_failure",
)  # fmt: skip
#: the study's two skill-side failure classes, and the three it names as the agent's own execution
SKILL_SIDE = frozenset({"search_truncation", "unverified_adoption"})
EXECUTION_SIDE = frozenset({"faulty_execution", "toolchain_friction", "budget_or_artifact_mismanagement"})


@dataclass(frozen=True)
class CampaignRecords:
    """A simulated campaign as the metrics see it: every attempt, the resolved plain treatments' comparisons,
    and the ground-truth labels (a treatment's follow level and failure class; a skill's rubric categories)."""

    attempts: tuple[TransferAttempt, ...]
    comparisons: tuple[Comparison, ...]
    follow: Mapping[str, str]  # treatment attempt id -> full | partial | none (absent: nothing actionable read)
    cause: Mapping[str, str]  # treatment attempt id -> failure class (absent: none assigned)
    categories: Mapping[str, frozenset[str]]  # attempt id -> rubric categories of the skill it wrote
    repeats_claims: frozenset[str]  # attempts whose own skill repeats unverified claims of the skill they read


@dataclass
class ProfileStats:
    """One profile's statistics, each a dict ``key -> value`` under the statistic's kind (``flat`` joins them)."""

    solo_pass_rate: dict[str, float] = field(default_factory=dict)  # per DSL, scored (inline CUDA excluded)
    speedup_geomean: dict[str, float | None] = field(default_factory=dict)  # per DSL, scored passes only
    inline_cuda_share: dict[str, float] = field(default_factory=dict)  # per DSL: solos that passed with inline CUDA
    paired_lift: dict[str, float] = field(default_factory=dict)  # per direction
    help_rate: dict[str, float] = field(default_factory=dict)
    harm_rate: dict[str, float] = field(default_factory=dict)
    skipped_share: dict[str, float] = field(default_factory=dict)  # per direction: treatments without a skill
    family_lift: dict[str, float] = field(default_factory=dict)  # "direction.family"
    family_rank: dict[str, float] = field(default_factory=dict)  # "direction.family": 1 = the direction's best
    lift_without_best: dict[str, float] = field(default_factory=dict)  # per direction, its best family removed
    standing_help: dict[str, float | None] = field(default_factory=dict)  # per standing, both directions
    standing_harm: dict[str, float | None] = field(default_factory=dict)
    standing_lift: dict[str, float | None] = field(default_factory=dict)
    verdict_change: dict[str, float | None] = field(default_factory=dict)  # helped: rescues; harmed: breaks
    reverse_of_helped: dict[str, float | None] = field(default_factory=dict)  # harmed, helped, margin (= − )
    follow_full: dict[str, float | None] = field(default_factory=dict)  # helped, harmed, gap (helped − harmed)
    cause_share: dict[str, float] = field(default_factory=dict)  # class -> share of all comparisons
    cause_mix: dict[str, float | None] = field(default_factory=dict)  # skill_side, execution: shares of assigned
    prevalence_gap: dict[str, float | None] = field(default_factory=dict)  # category: harmed − helped share
    propagation: dict[str, float | None] = field(default_factory=dict)  # helped, harmed: own skill repeats claims

    def flat(self) -> dict[str, float | None]:
        """``kind.key`` → value, the names calibration targets use."""
        return {f"{kind}.{key}": value for kind in _KINDS for key, value in getattr(self, kind).items()}


_KINDS = tuple(f for f in ProfileStats.__dataclass_fields__)


def statistic_names() -> tuple[str, ...]:
    """Every statistic a profile can have."""
    keys: dict[str, Iterable[str]] = {
        "solo_pass_rate": DSLS, "speedup_geomean": DSLS, "inline_cuda_share": DSLS, "paired_lift": DIRECTIONS,
        "help_rate": DIRECTIONS, "harm_rate": DIRECTIONS, "skipped_share": DIRECTIONS,
        "family_lift": [f"{d}.{f}" for d in DIRECTIONS for f in FAMILIES],
        "family_rank": [f"{d}.{f}" for d in DIRECTIONS for f in FAMILIES], "lift_without_best": DIRECTIONS,
        "standing_help": STANDINGS, "standing_harm": STANDINGS, "standing_lift": STANDINGS,
        "verdict_change": ("helped", "harmed"), "reverse_of_helped": ("harmed", "helped", "margin"),
        "follow_full": ("helped", "harmed", "gap"), "cause_share": FAILURE_CLASSES,
        "cause_mix": ("skill_side", "execution"), "prevalence_gap": CATEGORIES, "propagation": ("helped", "harmed"),
    }  # fmt: skip
    return tuple(f"{kind}.{key}" for kind in _KINDS for key in keys[kind])


# -- from simulated attempts to records --------------------------------------------------------------------------


def records(campaign_id: str, simulated: Iterable[tuple[PlannedAttempt, AttemptOutcome]]) -> CampaignRecords:
    """The metrics' view of simulated attempts (``simulate``)."""
    counter = itertools.count(1)
    slots: dict[tuple[str, str, int], list[TransferAttempt]] = {}
    follow: dict[str, str] = {}
    cause: dict[str, str] = {}
    categories: dict[str, frozenset[str]] = {}
    repeats: set[str] = set()
    attempts = []
    for a, outcome in simulated:
        inline_cuda = False
        for ev in outcome.events:
            p = ev.payload
            if ev.type == "VerifierResult" and p["submission"] == "final":
                inline_cuda = bool(p["inline_cuda"])
            elif ev.type == "LabelAssigned" and p["subject"] == "comparison":
                if p["labels"].get("follow"):
                    follow[a.attempt_id] = p["labels"]["follow"]
                if p["labels"].get("cause"):
                    cause[a.attempt_id] = p["labels"]["cause"]
            elif ev.type == "LabelAssigned" and p["subject"] == "skill":
                sentences = p["labels"]["sentences"]
                categories[a.attempt_id] = frozenset(s["category"] for s in sentences)
                if any(s.get("inherited") for s in sentences):
                    repeats.add(a.attempt_id)
        record = _record(campaign_id, a, outcome, inline_cuda, next(counter))
        attempts.append(record)
        slots.setdefault((a.model, a.problem, a.replicate), []).append(record)
    comps = [c for group in slots.values() for c in pair_slot(group, {}) if c.resolved and c.arm == "skill"
             and c.filter is None and c.chain_id is None]  # fmt: skip
    return CampaignRecords(tuple(attempts), tuple(comps), follow, cause, categories, frozenset(repeats))


def _record(campaign_id: str, a: PlannedAttempt, outcome: AttemptOutcome, inline_cuda: bool, position: int
            ) -> TransferAttempt:  # fmt: skip
    return TransferAttempt(
        attempt_id=a.attempt_id, campaign_id=campaign_id, model=a.model, problem=a.problem, family=a.family,
        dsl=a.dsl, arm=a.arm, replicate=a.replicate, source_attempt_id=a.source,
        baseline_attempt_id=a.baseline if a.names_baseline else None, chain_id=a.chain_id, hop=a.hop,
        filter=a.filter, status=outcome.status, passed=outcome.passed, inline_cuda=inline_cuda,
        runtime_ms=outcome.runtime_ms, speedup=outcome.speedup, skipped=outcome.skipped, started_position=position,
        finished_position=position,
    )  # fmt: skip


# -- per profile -------------------------------------------------------------------------------------------------


def profile_stats(rec: CampaignRecords) -> dict[str, ProfileStats]:
    """Statistics per model."""
    stats: dict[str, ProfileStats] = {}
    solos: dict[tuple[str, str], list[TransferAttempt]] = {}
    for a in rec.attempts:
        if a.arm.startswith("solo_") and a.chain_id is None:
            solos.setdefault((a.model, a.dsl), []).append(a)
    for (model, dsl), attempts in solos.items():
        s = stats.setdefault(model, ProfileStats())
        s.solo_pass_rate[dsl] = sum(a.scored_pass for a in attempts) / len(attempts)
        s.inline_cuda_share[dsl] = sum(bool(a.passed) and a.inline_cuda for a in attempts) / len(attempts)
        speedups = [a.speedup for a in attempts if a.scored_pass and a.speedup]
        s.speedup_geomean[dsl] = geometric_mean(speedups) if speedups else None
    by_model: dict[str, list[Comparison]] = {}
    for c in rec.comparisons:
        by_model.setdefault(c.model, []).append(c)
    for model, cs in by_model.items():
        _transfer(stats.setdefault(model, ProfileStats()), cs, rec)
    return stats


def _ratios(cs: Iterable[Comparison]) -> list[float]:
    return [c.r for c in cs if c.r is not None]


def _share(items: list[bool]) -> float | None:
    return sum(items) / len(items) if items else None


def _transfer(s: ProfileStats, cs: list[Comparison], rec: CampaignRecords) -> None:
    for direction in DIRECTIONS:
        cell = [c for c in cs if c.direction == direction]
        ratios = _ratios(cell)
        if not ratios:
            continue
        s.paired_lift[direction] = paired_lift(ratios)
        s.help_rate[direction] = help_rate(ratios)
        s.harm_rate[direction] = harm_rate(ratios)
        s.skipped_share[direction] = sum(bool(c.skipped) for c in cell) / len(cell)
        lifts = {f: paired_lift(r) for f in FAMILIES if (r := _ratios(c for c in cell if c.family == f))}
        ranked = sorted(lifts, key=lambda f: -lifts[f])
        for rank, family in enumerate(ranked, 1):
            s.family_lift[f"{direction}.{family}"] = lifts[family]
            s.family_rank[f"{direction}.{family}"] = float(rank)
        rest = _ratios(c for c in cell if c.family != ranked[0])
        if rest:
            s.lift_without_best[direction] = paired_lift(rest)
    for standing in STANDINGS:
        ratios = _ratios(c for c in cs if c.standing == standing)
        s.standing_help[standing] = help_rate(ratios) if ratios else None
        s.standing_harm[standing] = harm_rate(ratios) if ratios else None
        s.standing_lift[standing] = paired_lift(ratios) if ratios else None
    helped = [c for c in cs if c.outcome == "helped"]
    harmed = [c for c in cs if c.outcome == "harmed"]
    s.verdict_change["helped"] = _share([c.verdict_change == "rescue" for c in helped])
    s.verdict_change["harmed"] = _share([c.verdict_change == "break" for c in harmed])
    outcome_of = {(c.problem, c.replicate, c.direction): c.outcome for c in cs}
    reverse = [outcome_of.get((c.problem, c.replicate, reverse_direction(c.direction))) for c in helped]
    harmed_back, helped_back = _share([o == "harmed" for o in reverse]), _share([o == "helped" for o in reverse])
    s.reverse_of_helped.update(harmed=harmed_back, helped=helped_back)
    s.reverse_of_helped["margin"] = None if harmed_back is None or helped_back is None else harmed_back - helped_back
    full = {name: _share([rec.follow[c.treatment_attempt_id] == "full" for c in group
                          if c.treatment_attempt_id in rec.follow])
            for name, group in (("helped", helped), ("harmed", harmed))}  # fmt: skip
    s.follow_full.update(full)
    s.follow_full["gap"] = None if None in full.values() else full["helped"] - full["harmed"]  # type: ignore[operator]
    causes = [rec.cause[c.treatment_attempt_id] for c in harmed if c.treatment_attempt_id in rec.cause]
    for name in FAILURE_CLASSES:
        s.cause_share[name] = causes.count(name) / len(cs)
    s.cause_mix["skill_side"] = _share([c in SKILL_SIDE for c in causes])
    s.cause_mix["execution"] = _share([c in EXECUTION_SIDE for c in causes])
    read = {name: [rec.categories.get(c.source_attempt_id or "", frozenset()) for c in group]
            for name, group in (("helped", helped), ("harmed", harmed))}  # fmt: skip
    for category in CATEGORIES:
        a, b = (_share([category in cats for cats in read[n]]) for n in ("helped", "harmed"))
        s.prevalence_gap[category] = None if a is None or b is None else b - a
    s.propagation["helped"] = _share([c.treatment_attempt_id in rec.repeats_claims for c in helped])
    s.propagation["harmed"] = _share([c.treatment_attempt_id in rec.repeats_claims for c in harmed])


def summarize(campaign_id: str, simulated: Iterable[tuple[PlannedAttempt, AttemptOutcome]]) -> dict[str, ProfileStats]:
    """Per-profile statistics of simulated attempts (``simulate``)."""
    return profile_stats(records(campaign_id, simulated))


def pooled_standing(comps: Iterable[Comparison]) -> dict[str, tuple[int, float, float]]:
    """Standing → (n, help share, harm share) over all models and directions."""
    out: dict[str, tuple[int, float, float]] = {}
    cs = list(comps)
    for standing in STANDINGS:
        ratios = _ratios(c for c in cs if c.standing == standing)
        out[standing] = (
            len(ratios),
            help_rate(ratios) if ratios else math.nan,
            harm_rate(ratios) if ratios else math.nan,
        )
    return out
