"""Calibration: fit a profile's parameters to the expectation of target statistics over seeds.

A target file (JSON) names a profile, the statistics it should reproduce and the qualitative statements
that should hold for it, and the parameters to fit. Each statistic and statement is either ``stated`` (the
value is a number the study summary gives for this model; the field quotes the sentence) or ``assumed``
(an assumption consistent with the study; the field says why) — exactly one of the two.

The objective is evaluated on the same seeds for every candidate (common random numbers: each candidate
meets the same luck), the seeds simulated in parallel (``SeedPool``). It sums, over statistics, the squared
miss of the seed MEAN in units of tolerance, and over statements, how far each falls short of holding with
a margin of ``STATEMENT_Z`` seed-to-seed standard deviations (≈ 84% of seeds). It is minimised with
scipy.optimize (bounded Powell) over the parameters scaled to their ranges.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from mkbsim.errors import UserError
from mkbsim.simulator._profiles import AgentProfile, parameter_names, parameter_range
from mkbsim.simulator._seeds import SeedPool, Stats
from mkbsim.simulator._stats import statistic_names

TARGETS_DIR = Path(__file__).with_name("targets")
MISSING_PENALTY = 25.0  # a statistic no seed could compute counts as a miss of 5 tolerances
STATEMENT_Z = 1.0  # a statement should hold with a margin of this many seed-to-seed standard deviations (≈ 84%)
STATEMENT_WEIGHT = 4.0  # a statement at the coin-flip (z = 0) weighs like a statistic 2 tolerances off
STATEMENT_CAP = 25.0  # the most one statement adds to the objective
BASES = ("stated", "assumed")
OPS: dict[str, Callable[[float, float], float]] = {">": lambda a, b: a - b, "<": lambda a, b: b - a}


@dataclass(frozen=True)
class TargetStat:
    value: float
    tolerance: float
    log_scale: bool  # compare log(achieved / value) with the tolerance (speedups)
    basis: str  # "stated": the study gives this number for this model; "assumed": consistent with the study
    note: str  # the study's sentence (stated) or why the value was chosen (assumed)

    @property
    def stated(self) -> bool:
        return self.basis == "stated"

    def miss(self, achieved: float | None) -> float:
        """Signed distance in tolerances; NaN when the statistic could not be computed."""
        if achieved is None or (self.log_scale and achieved <= 0):
            return math.nan
        delta = math.log(achieved / self.value) if self.log_scale else achieved - self.value
        return delta / self.tolerance


@dataclass(frozen=True)
class Condition:
    stat: str
    op: str
    than: float | str  # a number, or another statistic

    def margin(self, stats: Stats) -> float | None:
        """How far the condition holds (positive) or fails (negative); None when a statistic is missing."""
        a = stats.get(self.stat)
        b = stats.get(self.than) if isinstance(self.than, str) else self.than
        return None if a is None or b is None else OPS[self.op](a, b)


@dataclass(frozen=True)
class TargetStatement:
    text: str
    basis: str
    note: str
    conditions: tuple[Condition, ...]  # all must hold
    weight: float = 1.0  # relative to the other statements (the shape bar weighs more)

    def holds(self, stats: Stats) -> bool:
        margins = [c.margin(stats) for c in self.conditions]
        return all(m is not None and m > 0 for m in margins)


@dataclass(frozen=True)
class Target:
    profile: str
    study_model: str
    source: str
    statistics: dict[str, TargetStat]
    statements: tuple[TargetStatement, ...]
    fit: dict[str, tuple[float, float]]  # parameter -> bounds (within the parameter's range)

    def objective(self, ev: Evaluation) -> float:
        total = 0.0
        for name, stat in self.statistics.items():
            m = stat.miss(ev.mean(name))
            total += MISSING_PENALTY if math.isnan(m) else m * m
        for s in self.statements:
            z = min(ev.z(c) for c in s.conditions)
            total += min(STATEMENT_CAP * s.weight, s.weight * STATEMENT_WEIGHT * max(0.0, STATEMENT_Z - z) ** 2)
        return total


@dataclass(frozen=True)
class Evaluation:
    """One profile's statistics at each seed."""

    seeds: tuple[int, ...]
    per_seed: tuple[Stats, ...]

    def values(self, name: str) -> list[float]:
        return [v for s in self.per_seed if (v := s.get(name)) is not None]

    def mean(self, name: str) -> float | None:
        values = self.values(name)
        return statistics.fmean(values) if values else None

    def sd(self, name: str) -> float | None:
        values = self.values(name)
        return statistics.stdev(values) if len(values) > 1 else None

    def share(self, statement: TargetStatement) -> float:
        """Share of seeds the statement holds at."""
        return sum(statement.holds(s) for s in self.per_seed) / len(self.per_seed)

    def z(self, c: Condition) -> float:
        """Mean margin over its seed-to-seed spread (−inf when no seed could compute it)."""
        margins = [m for s in self.per_seed if (m := c.margin(s)) is not None]
        if not margins:
            return -math.inf
        mean = statistics.fmean(margins)
        sd = statistics.stdev(margins) if len(margins) > 1 else 0.0
        spread = max(sd, 1e-3 * max(1.0, abs(mean)))
        return mean / spread


def _basis(path: Path, where: str, entry: dict[str, Any]) -> tuple[str, str]:
    given = [b for b in BASES if b in entry]
    if len(given) != 1 or not isinstance(entry[given[0]], str) or not entry[given[0]].strip():
        raise UserError(f"{path}: {where}: give exactly one of `stated` (the study's sentence) or `assumed` (why)")
    return given[0], entry[given[0]]


def _condition(path: Path, where: str, raw: Any) -> Condition:
    known = set(statistic_names())
    if not (isinstance(raw, list) and len(raw) == 3 and raw[1] in OPS):
        raise UserError(f"{path}: {where}: a condition is [statistic, \">\" or \"<\", number or statistic]")
    stat, op, than = raw
    for name in (stat, than) if isinstance(than, str) else (stat,):
        if name not in known:
            raise UserError(f"{path}: {where}: unknown statistic {name!r}")
    if not isinstance(than, str | int | float) or isinstance(than, bool):
        raise UserError(f"{path}: {where}: compare with a number or a statistic, got {than!r}")
    return Condition(stat, op, than if isinstance(than, str) else float(than))


def load_target(path: Path) -> Target:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: no such target file") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON: {exc}") from None
    known = set(statistic_names())
    try:
        stats = {}
        for name, s in data["statistics"].items():
            if name not in known:
                raise UserError(f"{path}: unknown statistic {name!r} (see `mkbsim calibrate --help`)")
            basis, note = _basis(path, name, s)
            stats[name] = TargetStat(float(s["value"]), float(s["tolerance"]), bool(s.get("log_scale", False)),
                                     basis, note)  # fmt: skip
        statements = []
        for i, s in enumerate(data.get("statements", [])):
            where = f"statements[{i}]"
            basis, note = _basis(path, where, s)
            conditions = tuple(_condition(path, where, c) for c in s["holds"])
            if not conditions:
                raise UserError(f"{path}: {where}: `holds` lists no condition")
            weight = float(s.get("weight", 1.0))
            if weight <= 0:
                raise UserError(f"{path}: {where}: weight must be positive")
            statements.append(TargetStatement(str(s["text"]), basis, note, conditions, weight))
        raw_fit = data.get("fit", [])
        bad = [n for n in raw_fit if n not in parameter_names()]
        if bad:
            raise UserError(f"{path}: unknown parameters to fit: {', '.join(bad)}")
        # "fit" lists parameter names (whole range) or maps each to [low, high] bounds
        fit_bounds = {n: (tuple(raw_fit[n]) if isinstance(raw_fit, dict) and raw_fit[n] else parameter_range(n))
                      for n in raw_fit}  # fmt: skip
        bounds = {n: (float(lo), float(hi)) for n, (lo, hi) in fit_bounds.items()}
        target = Target(str(data["profile"]), str(data.get("study_model", "")), str(data.get("source", "")), stats,
                        tuple(statements), bounds)  # fmt: skip
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"{path}: malformed target ({type(exc).__name__}: {exc})") from None
    for n, (lo, hi) in target.fit.items():
        full_lo, full_hi = parameter_range(n)
        if not full_lo <= lo < hi <= full_hi:
            raise UserError(f"{path}: bounds [{lo}, {hi}] for {n} must lie within its range [{full_lo}, {full_hi}]")
    if any(s.tolerance <= 0 for s in target.statistics.values()):
        raise UserError(f"{path}: every tolerance must be positive")
    return target


@cache
def shipped_targets() -> dict[str, Target]:
    """The six study targets, by profile name."""
    targets = [load_target(p) for p in sorted(TARGETS_DIR.glob("*.json"))]
    return {t.profile: t for t in targets}


def evaluate(profile: AgentProfile, problems: tuple[str, ...], seeds: Sequence[int], pool: SeedPool, *,
             replicates: int = 1) -> Evaluation:  # fmt: skip
    """The statistics of ``profile`` alone on seeded campaigns over ``problems``, one per seed (no store)."""
    results = pool.run((profile,), problems, seeds, replicates)
    return Evaluation(tuple(seeds), tuple(r.stats[profile.name] for r in results))


@dataclass(frozen=True)
class FitResult:
    before: AgentProfile
    after: AgentProfile
    evaluation_before: Evaluation
    evaluation_after: Evaluation
    objective_before: float
    objective_after: float
    evaluations: int


def fit(
    target: Target,
    profile: AgentProfile,
    problems: tuple[str, ...],
    seeds: Sequence[int],
    pool: SeedPool,
    *,
    replicates: int = 1,
    max_evaluations: int = 120,
    on_evaluation: Callable[[int, float], None] | None = None,
) -> FitResult:
    """Minimise ``target.objective`` over the ``target.fit`` parameters of ``profile`` within their bounds
    (bounded Powell, from the profile's values clipped into the bounds), every candidate on ``seeds``."""
    import numpy as np
    from scipy.optimize import minimize

    names = tuple(target.fit)
    if not names:
        raise UserError(f"target for {target.profile} names no parameters to fit")
    ranges = [target.fit[n] for n in names]

    def profile_at(x: Any) -> AgentProfile:
        values = {
            n: lo + float(np.clip(v, 0.0, 1.0)) * (hi - lo) for n, v, (lo, hi) in zip(names, x, ranges, strict=True)
        }
        return profile.replace(values)

    evaluations = 0
    best: tuple[float, AgentProfile, Evaluation] | None = None

    def objective(x: Any) -> float:
        nonlocal evaluations, best
        candidate = profile_at(x)
        ev = evaluate(candidate, problems, seeds, pool, replicates=replicates)
        value = target.objective(ev)
        evaluations += 1
        if best is None or value < best[0]:
            best = (value, candidate, ev)
        if on_evaluation is not None:
            on_evaluation(evaluations, best[0])
        return value

    start = [
        min(1.0, max(0.0, (getattr(profile, n) - lo) / (hi - lo))) for n, (lo, hi) in zip(names, ranges, strict=True)
    ]
    before = evaluate(profile, problems, seeds, pool, replicates=replicates)
    minimize(objective, np.array(start), method="Powell", bounds=[(0.0, 1.0)] * len(names),
             options={"maxfev": max_evaluations, "xtol": 0.02, "ftol": 0.01})  # fmt: skip
    assert best is not None
    value, after, ev_after = best
    before_value = target.objective(before)
    if before_value <= value:  # the start was best: keep it (Powell's first evaluation is a clipped start)
        after, ev_after, value = profile, before, before_value
    return FitResult(profile, after, before, ev_after, before_value, value, evaluations)
