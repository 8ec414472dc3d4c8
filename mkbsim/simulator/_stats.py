"""Headline statistics of simulated attempts, scored by the metric rules of ``mkbsim.metrics``.

Calibration and tests need them without an event store, so simulated attempts (``simulate``) are turned
into the metrics package's ``TransferAttempt`` records and paired with its ``pair_slot`` — one definition
of r, standing and the aggregates for simulated and stored campaigns alike. Only treatments count here.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from mkbsim.campaigns import AttemptOutcome, PlannedAttempt
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
)

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


def outcome_of(campaign_id: str, a: PlannedAttempt, outcome: AttemptOutcome, position: int) -> TransferAttempt:
    return TransferAttempt(
        attempt_id=a.attempt_id, campaign_id=campaign_id, model=a.model, problem=a.problem, family=a.family,
        dsl=a.dsl, arm=a.arm, replicate=a.replicate, source_attempt_id=a.source,
        baseline_attempt_id=a.baseline if a.names_baseline else None, chain_id=a.chain_id, hop=a.hop,
        filter=a.filter, status=outcome.status, passed=outcome.passed, inline_cuda=False,
        runtime_ms=outcome.runtime_ms, speedup=outcome.speedup, skipped=outcome.skipped, started_position=position,
        finished_position=position,
    )  # fmt: skip


def slot_outcomes(
    campaign_id: str, simulated: Iterable[tuple[PlannedAttempt, AttemptOutcome]]
) -> list[list[TransferAttempt]]:
    """The simulated attempts as pairing records, grouped by slot (model, problem, replicate)."""
    counter = itertools.count(1)
    slots: dict[tuple[str, str, int], list[TransferAttempt]] = {}
    for a, outcome in simulated:
        record = outcome_of(campaign_id, a, outcome, next(counter))
        slots.setdefault((a.model, a.problem, a.replicate), []).append(record)
    return list(slots.values())


def comparisons(
    groups: Iterable[list[TransferAttempt]], referenced: Mapping[str, TransferAttempt] | None = None
) -> list[Comparison]:
    out: list[Comparison] = []
    for group in groups:
        out.extend(c for c in pair_slot(group, referenced or {}) if c.resolved and c.arm == "skill")
    return out


def profile_stats(solos: Iterable[TransferAttempt], comps: Iterable[Comparison]) -> dict[str, ProfileStats]:
    """Statistics per model from solo attempts and resolved comparisons."""
    stats: dict[str, ProfileStats] = {}
    by_model_dsl: dict[tuple[str, str], list[TransferAttempt]] = {}
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


def summarize(campaign_id: str, simulated: Iterable[tuple[PlannedAttempt, AttemptOutcome]]) -> dict[str, ProfileStats]:
    """Per-profile statistics of simulated attempts (``simulate``)."""
    groups = slot_outcomes(campaign_id, simulated)
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
