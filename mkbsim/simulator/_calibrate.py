"""Calibration: fit a profile's parameters to target statistics of the study.

A target file (JSON) names a profile, the statistics it should reproduce — each with a value, a
tolerance and whether the study states it or it is an assumption consistent with the study — and the
parameters to fit. The objective is the sum of squared misses in units of tolerance, evaluated on a
seeded campaign (common random numbers: every evaluation sees the same luck), minimised with
scipy.optimize (bounded Powell) over the parameters scaled to their ranges.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from mkbsim.errors import UserError
from mkbsim.simulator._campaign import CampaignConfig, simulate
from mkbsim.simulator._profiles import AgentProfile, parameter_names, parameter_range
from mkbsim.simulator._stats import summarize

TARGETS_DIR = Path(__file__).with_name("targets")
STATISTICS = (
    "solo_pass_rate.cutedsl", "solo_pass_rate.tirx", "speedup_geomean.cutedsl", "speedup_geomean.tirx",
    "paired_lift.cutedsl2tirx", "paired_lift.tirx2cutedsl", "help_rate.cutedsl2tirx", "help_rate.tirx2cutedsl",
    "harm_rate.cutedsl2tirx", "harm_rate.tirx2cutedsl", "standing_help.above", "standing_harm.below",
)  # fmt: skip
MISSING_PENALTY = 25.0  # a statistic the run could not compute counts as a miss of 5 tolerances


@dataclass(frozen=True)
class TargetStat:
    value: float
    tolerance: float
    log_scale: bool  # compare log(achieved / value) with the tolerance (speedups)
    stated: bool  # the study states it (else: an assumption consistent with the study)

    def miss(self, achieved: float | None) -> float:
        """Signed distance in tolerances; NaN when the statistic could not be computed."""
        if achieved is None or (self.log_scale and achieved <= 0):
            return math.nan
        delta = math.log(achieved / self.value) if self.log_scale else achieved - self.value
        return delta / self.tolerance


@dataclass(frozen=True)
class Target:
    profile: str
    study_model: str
    source: str
    statistics: dict[str, TargetStat]
    fit: dict[str, tuple[float, float]]  # parameter -> bounds (within the parameter's range)

    def objective(self, achieved: dict[str, float | None]) -> float:
        total = 0.0
        for name, stat in self.statistics.items():
            m = stat.miss(achieved.get(name))
            total += MISSING_PENALTY if math.isnan(m) else m * m
        return total


def load_target(path: Path) -> Target:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: no such target file") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON: {exc}") from None
    try:
        stats = {
            name: TargetStat(
                float(s["value"]), float(s["tolerance"]), bool(s.get("log_scale", False)), bool(s.get("stated", False))
            )
            for name, s in data["statistics"].items()
        }
        raw_fit = data.get("fit", [])
        bad = [n for n in raw_fit if n not in parameter_names()]
        if bad:
            raise UserError(f"{path}: unknown parameters to fit: {', '.join(bad)}")
        # "fit" lists parameter names (whole range) or maps each to [low, high] bounds
        fit_bounds = {n: (tuple(raw_fit[n]) if isinstance(raw_fit, dict) and raw_fit[n] else parameter_range(n))
                      for n in raw_fit}  # fmt: skip
        target = Target(str(data["profile"]), str(data.get("study_model", "")), str(data.get("source", "")), stats,
                        {n: (float(lo), float(hi)) for n, (lo, hi) in fit_bounds.items()})  # fmt: skip
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"{path}: malformed target ({type(exc).__name__}: {exc})") from None
    unknown = [n for n in target.statistics if n not in STATISTICS]
    if unknown:
        raise UserError(f"{path}: unknown statistics {', '.join(unknown)} (known: {', '.join(STATISTICS)})")
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


def evaluate(profile: AgentProfile, problems: tuple[str, ...], replicates: int, seed: int) -> dict[str, float | None]:
    """The statistics of ``profile`` on a seeded campaign over ``problems`` (no store involved)."""
    config = CampaignConfig((profile,), problems, replicates, seed)
    stats = summarize(config.campaign_id, simulate(config))
    return stats[profile.name].flat()


@dataclass(frozen=True)
class FitResult:
    before: AgentProfile
    after: AgentProfile
    achieved_before: dict[str, float | None]
    achieved_after: dict[str, float | None]
    objective_before: float
    objective_after: float
    evaluations: int


def fit(
    target: Target,
    profile: AgentProfile,
    problems: tuple[str, ...],
    *,
    replicates: int = 1,
    seed: int = 0,
    max_evaluations: int = 120,
    on_evaluation: Callable[[int, float], None] | None = None,
) -> FitResult:
    """Minimise ``target.objective`` over the ``target.fit`` parameters of ``profile`` within their bounds
    (bounded Powell, from the profile's values clipped into the bounds)."""
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
    best: tuple[float, AgentProfile, dict[str, float | None]] | None = None

    def objective(x: Any) -> float:
        nonlocal evaluations, best
        candidate = profile_at(x)
        achieved = evaluate(candidate, problems, replicates, seed)
        value = target.objective(achieved)
        evaluations += 1
        if best is None or value < best[0]:
            best = (value, candidate, achieved)
        if on_evaluation is not None:
            on_evaluation(evaluations, best[0])
        return value

    start = [
        min(1.0, max(0.0, (getattr(profile, n) - lo) / (hi - lo))) for n, (lo, hi) in zip(names, ranges, strict=True)
    ]
    before = evaluate(profile, problems, replicates, seed)
    minimize(objective, np.array(start), method="Powell", bounds=[(0.0, 1.0)] * len(names),
             options={"maxfev": max_evaluations, "xtol": 0.02, "ftol": 0.01})  # fmt: skip
    assert best is not None
    value, after, achieved = best
    return FitResult(profile, after, before, achieved, target.objective(before), value, evaluations)
