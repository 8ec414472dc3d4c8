"""`mkbsim power` (DESIGN §6): power of a model × direction cell to detect a paired lift, by simulation
with the campaign's cluster structure.

A cell's log r is simulated as  log(1 + lift) + b_problem + e_replicate,  b ~ N(0, sd² · icc),
e ~ N(0, sd² · (1 − icc)). From a stored campaign, each cell's sd is the SD of its log r and icc the
share of variance between problems (one-way ANOVA over replicates; without replicates it cannot be
told apart, so ``icc`` is assumed, 1 by default: replicates then add nothing, the cautious reading).
Each simulated campaign is tested as the report tests small cells: Student t on the problems' mean
log r (two-sided, alpha 0.05). Power = share of simulations that reject; the same random numbers serve
every lift (common random numbers), so power rises smoothly with the lift and bisection finds the
minimum detectable lift.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mkbsim.metrics._tdist import t_quantile

ALPHA = 0.05
TARGET = 0.8
PROBLEM_GRID = (10, 20, 30, 40, 60, 74, 100, 150, 200, 300, 500)
REPLICATE_GRID = (1, 2, 3, 5)


@dataclass(frozen=True)
class CellSpread:
    model: str
    direction: str
    n: int
    problems: int
    replicates: int
    sd: float
    icc: float


def spread(model: str, direction: str, logs: Sequence[float], problems: Sequence[str], icc: float | None) -> CellSpread:
    """A stored cell's SD of log r and its between-problem share (estimated when replicates exist)."""
    x = np.asarray(logs, dtype=float)
    groups: dict[str, list[float]] = {}
    for v, p in zip(logs, problems, strict=True):
        groups.setdefault(p, []).append(v)
    k, n = len(groups), len(logs)
    sd = float(x.std(ddof=1)) if n > 1 else 0.0
    estimated = None
    if n > k > 1:  # one-way ANOVA variance components
        within = sum(sum((v - sum(g) / len(g)) ** 2 for v in g) for g in groups.values()) / (n - k)
        between = sum(len(g) * (sum(g) / len(g) - x.mean()) ** 2 for g in groups.values()) / (k - 1)
        m0 = (n - sum(len(g) ** 2 for g in groups.values()) / n) / (k - 1)
        component = max(0.0, (between - within) / m0)
        estimated = component / (component + within) if component + within > 0 else 1.0
    return CellSpread(model, direction, n, k, round(n / k) if k else 0, sd,
                      estimated if icc is None and estimated is not None else (1.0 if icc is None else icc))


def power(cell: CellSpread, lift: float, problems: int, replicates: int, *, simulations: int, seed: int = 0) -> float:
    return float(_rejections(cell, [lift], problems, replicates, simulations, seed)[0])


def _rejections(cell: CellSpread, lifts: Sequence[float], problems: int, replicates: int, simulations: int,
                seed: int) -> np.ndarray:  # fmt: skip
    rng = np.random.default_rng(seed)
    b = rng.standard_normal((simulations, problems)) * cell.sd * math.sqrt(cell.icc)
    e = rng.standard_normal((simulations, problems, replicates)) * cell.sd * math.sqrt(1.0 - cell.icc)
    means = b + e.mean(axis=2)  # the problems' mean log r, before the effect
    centred = means - means.mean(axis=1, keepdims=True)
    se = np.sqrt((centred**2).sum(axis=1) / (problems - 1) / problems)
    critical = t_quantile(1.0 - ALPHA / 2.0, problems - 1)
    out = []
    for lift in lifts:
        t = (means.mean(axis=1) + math.log1p(lift)) / np.where(se > 0, se, np.inf)
        out.append(np.mean(np.abs(t) > critical))
    return np.asarray(out)


def minimum_detectable_lift(cell: CellSpread, problems: int, replicates: int, *, simulations: int,
                            seed: int = 0) -> float | None:  # fmt: skip
    """The smallest positive lift detected with power TARGET (bisection on log(1 + lift), same draws)."""
    if cell.sd == 0 or problems < 2:
        return None
    lo, hi = 0.0, 5.0
    if power(cell, math.expm1(hi), problems, replicates, simulations=simulations, seed=seed) < TARGET:
        return None
    for _ in range(30):
        mid = (lo + hi) / 2
        if power(cell, math.expm1(mid), problems, replicates, simulations=simulations, seed=seed) >= TARGET:
            hi = mid
        else:
            lo = mid
    return math.expm1(hi)


def needed(cell: CellSpread, lift: float, *, simulations: int, seed: int = 0) -> dict[int, int | None]:
    """Per replicates in REPLICATE_GRID: the fewest problems of PROBLEM_GRID reaching TARGET power."""
    out: dict[int, int | None] = {}
    for replicates in REPLICATE_GRID:
        out[replicates] = next((p for p in PROBLEM_GRID
                                if power(cell, lift, p, replicates, simulations=simulations, seed=seed) >= TARGET),
                               None)  # fmt: skip
    return out


def power_report(cells: Sequence[CellSpread], lift: float, *, simulations: int,
                 progress: Callable[[str], None] | None = None) -> list[dict[str, object]]:  # fmt: skip
    rows = []
    for cell in cells:
        if progress:
            progress(f"{cell.model} {cell.direction}")
        rows.append({
            "model": cell.model, "direction": cell.direction, "n": cell.n, "problems": cell.problems,
            "replicates": cell.replicates, "sd_log_r": cell.sd, "icc": cell.icc,
            "minimum_detectable_lift": minimum_detectable_lift(cell, cell.problems, max(cell.replicates, 1),
                                                               simulations=simulations),
            "lift": lift,
            "problems_needed": {str(r): p for r, p in needed(cell, lift, simulations=simulations).items()},
        })  # fmt: skip
    return rows
