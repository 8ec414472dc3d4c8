"""`mkbsim power` (DESIGN §6): power of a model × direction cell to detect a paired lift, by simulation
with the campaign's cluster structure.

A cell's log r is simulated as  log(1 + lift) + b_problem + e_replicate,  b ~ N(0, sd² · icc),
e ~ N(0, sd² · (1 − icc)). From a stored campaign, each cell's sd is the SD of its log r and icc the
share of variance between problems (one-way ANOVA over replicates; without replicates it cannot be
told apart, so ``icc`` is assumed, 1 by default: replicates then add nothing, the cautious reading).
Each simulated campaign is tested as the report tests small cells: Student t on the problems' mean
log r (two-sided, alpha 0.05). Power = share of simulations that reject; the same random numbers serve
every lift (common random numbers), so power rises smoothly with the lift and bisection finds the
minimum detectable lift; the designs of one replicate count share theirs too (nested in problems).
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
    return _Simulated(problem_means(cell, problems, replicates, simulations, seed)).power(lift)


def problem_means(cell: CellSpread, problems: int, replicates: int, simulations: int, seed: int) -> np.ndarray:
    """Simulated campaigns' per-problem mean log r before the effect (simulations × problems)."""
    rng = np.random.default_rng(seed)
    b = rng.standard_normal((simulations, problems)) * cell.sd * math.sqrt(cell.icc)
    # the mean of R replicate errors N(0, sd² (1 − icc)) is N(0, sd² (1 − icc) / R): drawn as such
    e = rng.standard_normal((simulations, problems)) * cell.sd * math.sqrt((1.0 - cell.icc) / replicates)
    return b + e


class _Simulated:
    """Simulated campaigns of one design before the effect: each one's mean log r over problems and its
    standard error. The effect only shifts the mean, so one set of draws serves every lift."""

    def __init__(self, means: np.ndarray) -> None:
        problems = means.shape[1]
        centred = means - means.mean(axis=1, keepdims=True)
        se = np.sqrt((centred**2).sum(axis=1) / (problems - 1) / problems)
        self.mean = means.mean(axis=1)
        self.se = np.where(se > 0, se, np.inf)
        self.critical = t_quantile(1.0 - ALPHA / 2.0, problems - 1)

    def power(self, lift: float) -> float:
        """Share of the simulated campaigns whose t test rejects, with ``lift`` added."""
        return float(np.mean(np.abs((self.mean + math.log1p(lift)) / self.se) > self.critical))


def minimum_detectable_lift(cell: CellSpread, problems: int, replicates: int, *, simulations: int,
                            seed: int = 0) -> float | None:  # fmt: skip
    """The smallest positive lift detected with power TARGET (bisection on log(1 + lift), same draws)."""
    if cell.sd == 0 or problems < 2:
        return None
    simulated = _Simulated(problem_means(cell, problems, replicates, simulations, seed))
    lo, hi = 0.0, 5.0
    if simulated.power(math.expm1(hi)) < TARGET:
        return None
    for _ in range(30):
        mid = (lo + hi) / 2
        if simulated.power(math.expm1(mid)) >= TARGET:
            hi = mid
        else:
            lo = mid
    return math.expm1(hi)


def needed(cell: CellSpread, lift: float, *, simulations: int, seed: int = 0) -> dict[int, int | None]:
    """Per replicates in REPLICATE_GRID: the fewest problems of PROBLEM_GRID reaching TARGET power. The
    designs of one replicate count share their draws (a design of P problems takes the first P of the
    largest), so power rises smoothly with the problems and each replicate count is drawn once."""
    out: dict[int, int | None] = {}
    for replicates in REPLICATE_GRID:
        largest = problem_means(cell, PROBLEM_GRID[-1], replicates, simulations, seed)
        out[replicates] = next((p for p in PROBLEM_GRID if _Simulated(largest[:, :p]).power(lift) >= TARGET),
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
