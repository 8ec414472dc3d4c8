"""Uncertainty that respects the design (DESIGN §6): problems are clusters, and the comparisons of one
problem (models, directions, replicates, campaigns) are resampled or permuted together.

- ``ClusterBootstrap``: percentile intervals of any statistic that is a function of per-problem sums
  (rates, shares, lifts, differences of them), from one matrix of resampled problem counts per cell, so
  every statistic of a cell sees the same resamples;
- ``cluster_t_interval``: the small-cell interval of the paired lift, a Student t interval on mean log r
  with a cluster-robust (CR1) standard error and (problems − 1) degrees of freedom. At 8–10 problems the
  percentile bootstrap under-covers (its spread is the plug-in one, without the t quantile); BCa does
  worse there (its acceleration is estimated from the same few problems).
  ``tests/metrics/test_clusters.py`` checks the coverage by simulation;
- ``sign_flip_p``: the cluster-aware test of "mean log r = 0": each problem's sum of log r keeps or flips
  its sign (exact over all 2^k flips up to ``EXACT_FLIPS_MAX`` problems, Monte Carlo beyond);
- ``bootstrap_p``: a two-sided p-value read off the bootstrap distribution of a difference (the level at
  which the percentile interval just touches 0), for statistics with no natural permutation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

RESAMPLES = 2000
LEVEL = 0.95
#: problems below which the paired lift's interval is the cluster t interval instead of the bootstrap
SMALL_CELL_PROBLEMS = 20
#: all 2^k sign flips are enumerated up to this many problems; Monte Carlo flips beyond
EXACT_FLIPS_MAX = 12
FLIPS = 4999

Interval = list[float]


def cluster_index(clusters: Sequence[Hashable]) -> tuple[np.ndarray, int]:
    """Each observation's cluster number and the number of clusters. Clusters are numbered in the order of
    their labels, not of first appearance, so resamples and flips do not depend on the order the events were
    stored in (a resumed campaign stores its attempts in another order than an uninterrupted one)."""
    labels = {label: number for number, label in enumerate(sorted(set(clusters), key=repr))}
    index = np.fromiter((labels[c] for c in clusters), dtype=np.intp, count=len(clusters))
    return index, len(labels)


class ClusterBootstrap:
    """Resampled problem counts for one cell: ``resamples`` draws of its k problems with replacement
    (deterministic for a seed). ``sums(values)`` gives per-problem sums; ``interval`` evaluates a
    statistic on every resample's totals."""

    def __init__(self, clusters: Sequence[Hashable], *, resamples: int = RESAMPLES, seed: int = 0) -> None:
        if not clusters:
            raise ValueError("a bootstrap needs at least one observation")
        self.index, self.k = cluster_index(clusters)
        draws = np.random.default_rng(seed).integers(0, self.k, size=(resamples, self.k))
        offsets = (draws + self.k * np.arange(resamples)[:, None]).ravel()
        self.counts = np.bincount(offsets, minlength=resamples * self.k).reshape(resamples, self.k).astype(float)

    def sums(self, values: Sequence[float] | np.ndarray) -> np.ndarray:
        """Per-problem sums of one value per observation."""
        return np.bincount(self.index, weights=np.asarray(values, dtype=np.float64), minlength=self.k)

    def replicates(self, statistic: Callable[..., np.ndarray], *columns: Sequence[float] | np.ndarray) -> np.ndarray:
        """``statistic`` of the resampled totals of each column (one value per resample; NaN where undefined)."""
        totals = [self.counts @ self.sums(c) for c in columns]
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(statistic(*totals), dtype=np.float64)

    def interval(
        self, statistic: Callable[..., np.ndarray], *columns: Sequence[float] | np.ndarray, level: float = LEVEL
    ) -> Interval | None:
        """Percentile interval of ``statistic``; None when it is undefined in most resamples."""
        return percentile_interval(self.replicates(statistic, *columns), level)


def percentile_interval(values: np.ndarray, level: float = LEVEL) -> Interval | None:
    finite = values[np.isfinite(values)]
    if finite.size < values.size / 2 or finite.size == 0:
        return None
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(finite, [alpha, 1.0 - alpha])
    return [float(lo), float(hi)]


def bootstrap_p(values: np.ndarray) -> float | None:
    """Two-sided p of "the statistic is 0" from its bootstrap replicates: twice the smaller share of
    replicates on either side of 0 (ties count half), at most 1."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None
    below = np.count_nonzero(finite < 0) + 0.5 * np.count_nonzero(finite == 0)
    return float(min(1.0, 2.0 * min(below, finite.size - below) / finite.size))


def ratio_of_sums(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    return numerator / denominator


def lift_of_sums(log_sum: np.ndarray, count: np.ndarray) -> np.ndarray:
    return np.expm1(log_sum / count)


def cluster_t_interval(logs: Sequence[float], clusters: Sequence[Hashable], level: float = LEVEL) -> Interval | None:
    """t interval of the paired lift: mean log r ± t(k−1) · SE, SE from the problems' residual sums
    (CR1: k/(k−1) Σ_c (S_c − m N_c)² / N²), mapped back by exp − 1. None with fewer than 2 problems."""
    from mkbsim.metrics._tdist import t_quantile

    index, k = cluster_index(clusters)
    if k < 2:
        return None
    x = np.asarray(logs, dtype=np.float64)
    n = x.size
    mean = math.fsum(x) / n
    residual = np.bincount(index, weights=x - mean, minlength=k)
    se = math.sqrt(k / (k - 1) * float(residual @ residual)) / n
    half = t_quantile(0.5 + level / 2.0, k - 1) * se
    return [math.expm1(mean - half), math.expm1(mean + half)]


def sign_flip_p(values: Sequence[float], clusters: Sequence[Hashable], *, seed: int = 0) -> float | None:
    """Two-sided p of "mean = 0" with each problem's sum of ``values`` flipped as a whole: exact over all
    2^k flips up to EXACT_FLIPS_MAX problems, else FLIPS random flips plus the observed one. None when
    every problem's sum is 0."""
    index, k = cluster_index(clusters)
    sums = np.bincount(index, weights=np.asarray(values, dtype=np.float64), minlength=k)
    sums = sums[sums != 0]
    if sums.size == 0:
        return None
    observed = abs(math.fsum(sums)) * (1.0 - 1e-12)  # flips equal up to rounding count as extreme
    if sums.size <= EXACT_FLIPS_MAX:
        bits = (np.arange(2**sums.size)[:, None] >> np.arange(sums.size)) & 1
        flipped = np.abs((1 - 2 * bits) @ sums)
        return float(np.count_nonzero(flipped >= observed) / flipped.size)
    signs = np.random.default_rng(seed).integers(0, 2, size=(FLIPS, sums.size)) * 2 - 1
    flipped = np.abs(signs @ sums)
    return float((1 + np.count_nonzero(flipped >= observed)) / (FLIPS + 1))


def adjust(pvalues: Sequence[float | None]) -> tuple[list[float | None], list[float | None]]:
    """Holm and Benjamini–Hochberg adjusted p-values across one table (None stays None, and does not count)."""
    present = [(p, i) for i, p in enumerate(pvalues) if p is not None]
    holm: list[float | None] = [None] * len(pvalues)
    bh: list[float | None] = [None] * len(pvalues)
    m = len(present)
    running = 0.0
    for rank, (p, i) in enumerate(sorted(present)):
        running = max(running, min(1.0, (m - rank) * p))
        holm[i] = running
    running = 1.0
    for rank, (p, i) in reversed(list(enumerate(sorted(present)))):
        running = min(running, m * p / (rank + 1))
        bh[i] = min(1.0, running)
    return holm, bh


def add_adjusted(rows: Sequence[dict[str, Any]], key: str = "p") -> None:
    """Set ``<key>_holm`` and ``<key>_bh`` on every row, adjusting ``key`` across the rows."""
    holm, bh = adjust([row[key] for row in rows])
    for row, h, b in zip(rows, holm, bh, strict=True):
        row[f"{key}_holm"], row[f"{key}_bh"] = h, b


def two_sided_p(null: np.ndarray, observed: float, expected: float) -> float:
    """Monte Carlo two-sided p: null draws at least as far from their expectation as the observation
    (with the observation itself counted once)."""
    distance = abs(observed - expected) * (1.0 - 1e-12)
    return float((1 + np.count_nonzero(np.abs(null - expected) >= distance)) / (null.size + 1))
