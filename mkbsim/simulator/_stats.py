"""Headline statistics of simulated attempts, scored by the metric rules of ``mkbsim.metrics``.

Calibration and tests need them without an event store, so attempts are turned into the metrics
package's ``AttemptOutcome`` records and paired with its ``pair_slot`` — one definition of r,
standing and the aggregates for simulated and stored campaigns alike.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from mkbsim.metrics import (
    DIRECTIONS,
    STANDINGS,
    AttemptOutcome,
    Comparison,
    geometric_mean,
    harm_rate,
    help_rate,
    pair_slot,
    paired_lift,
)
from mkbsim.simulator._attempt import AttemptResult, AttemptSpec
from mkbsim.simulator._campaign import SlotResult

DSLS = ("cutedsl", "tirx")


@dataclass
class ProfileStats:
    """One profile's statistics: per DSL (solo), per direction (comparisons), per standing (pooled directions)."""

    solo_pass_rate: dict[str, float] = field(default_factory=dict)
    speedup_geomean: dict[str, float | None] = field(default_factory=dict)
    paired_lift: dict[str, float] = field(default_factory=dict)
    help_rate: dict[str, float] = field(default_factory=dict)
    harm_rate: dict[str, float] = field(default_factory=dict)
    standing_help: dict[str, float | None] = field(default_factory=dict)
    standing_harm: dict[str, float | None] = field(default_factory=dict)
    skipped: int = 0

    def flat(self) -> dict[str, float | None]:
        """``statistic.key`` → value, the names calibration targets use."""
        out: dict[str, float | None] = {}
        for name in ("solo_pass_rate", "speedup_geomean", "paired_lift", "help_rate", "harm_rate", "standing_help",
                     "standing_harm"):  # fmt: skip
            for key, value in getattr(self, name).items():
                out[f"{name}.{key}"] = value
        return out


def outcome_of(spec: AttemptSpec, result: AttemptResult, position: int) -> AttemptOutcome:
    return AttemptOutcome(
        attempt_id=spec.attempt_id, campaign_id=spec.campaign_id, model=spec.profile.name,
        problem=spec.space.problem, family=spec.space.family, dsl=spec.dsl, arm=spec.arm,
        replicate=spec.replicate, source_attempt_id=spec.source_attempt_id,
        baseline_attempt_id=spec.baseline_attempt_id, chain_id=None, hop=None, filter=spec.filter,
        status="finished", passed=result.passed, inline_cuda=False, runtime_ms=result.runtime_ms,
        speedup=result.speedup, skipped=result.skipped, started_position=position, finished_position=position,
    )  # fmt: skip


def slot_outcomes(slots: Iterable[SlotResult]) -> list[list[AttemptOutcome]]:
    counter = itertools.count(1)
    return [[outcome_of(spec, result, next(counter)) for spec, result in s.attempts.values()] for s in slots]


def comparisons(
    groups: Iterable[list[AttemptOutcome]], referenced: Mapping[str, AttemptOutcome] | None = None
) -> list[Comparison]:
    out: list[Comparison] = []
    for group in groups:
        out.extend(c for c in pair_slot(group, referenced or {}) if c.resolved)
    return out


def profile_stats(solos: Iterable[AttemptOutcome], comps: Iterable[Comparison]) -> dict[str, ProfileStats]:
    """Statistics per model from solo attempts and resolved comparisons."""
    stats: dict[str, ProfileStats] = {}
    by_model_dsl: dict[tuple[str, str], list[AttemptOutcome]] = {}
    for a in solos:
        if a.arm.startswith("solo_"):
            by_model_dsl.setdefault((a.model, a.dsl), []).append(a)
    for (model, dsl), attempts in by_model_dsl.items():
        s = stats.setdefault(model, ProfileStats())
        s.solo_pass_rate[dsl] = sum(a.scored_pass for a in attempts) / len(attempts)
        speedups = [a.speedup for a in attempts if a.scored_pass and a.speedup]
        s.speedup_geomean[dsl] = geometric_mean(speedups) if speedups else None
    by_model: dict[str, list[Comparison]] = {}
    for c in comps:
        by_model.setdefault(c.model, []).append(c)
    for model, cs in by_model.items():
        s = stats.setdefault(model, ProfileStats())
        s.skipped = sum(bool(c.skipped) for c in cs)
        for direction in DIRECTIONS:
            ratios = [c.r for c in cs if c.direction == direction and c.r is not None]
            if ratios:
                s.paired_lift[direction] = paired_lift(ratios)
                s.help_rate[direction] = help_rate(ratios)
                s.harm_rate[direction] = harm_rate(ratios)
        for standing in STANDINGS:
            ratios = [c.r for c in cs if c.standing == standing and c.r is not None]
            s.standing_help[standing] = help_rate(ratios) if ratios else None
            s.standing_harm[standing] = harm_rate(ratios) if ratios else None
    return stats


def summarize(slots: Iterable[SlotResult]) -> dict[str, ProfileStats]:
    """Per-profile statistics of simulated slots (two solos and two treatments each)."""
    groups = slot_outcomes(slots)
    return profile_stats(itertools.chain.from_iterable(groups), comparisons(groups))


def pooled_standing(comps: Iterable[Comparison]) -> dict[str, tuple[int, float, float]]:
    """Standing → (n, help share, harm share) over all models and directions."""
    out: dict[str, tuple[int, float, float]] = {}
    cs = list(comps)
    for standing in STANDINGS:
        ratios = [c.r for c in cs if c.standing == standing and c.r is not None]
        out[standing] = (
            len(ratios),
            help_rate(ratios) if ratios else math.nan,
            harm_rate(ratios) if ratios else math.nan,
        )
    return out
