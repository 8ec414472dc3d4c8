"""Uncertainty that respects the design (DESIGN §6): problems are clusters, and the comparisons of one
problem (models, directions, replicates, campaigns) are resampled or permuted together.

- ``ClusterBootstrap``: percentile intervals of any statistic that is a function of per-problem sums
  (rates, shares, lifts, differences of them), from one matrix of resampled problem counts per cell, so
  every statistic of a cell sees the same resamples. The matrix depends only on the cell's number of
  problems and the seed: the report's sections use seed 0 everywhere (common random numbers: cells of
  one size share a matrix, a cell's interval still does not depend on the other cells);
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

import functools
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
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
    # one C-level pass (map over the dict's lookup): the report numbers the problems of hundreds of cells
    return np.fromiter(map(labels.__getitem__, clusters), dtype=np.intp, count=len(clusters)), len(labels)


@dataclass(frozen=True, slots=True)
class Clusters:
    """Observations already numbered by cluster as ``cluster_index`` numbers them (the report numbers
    its problems once and passes these instead of labels)."""

    index: np.ndarray
    k: int


def clusters_of(clusters: Sequence[Hashable] | Clusters) -> Clusters:
    return clusters if isinstance(clusters, Clusters) else Clusters(*cluster_index(clusters))


@functools.lru_cache(maxsize=64)
def resampled_counts(k: int, resamples: int, seed: int) -> np.ndarray:
    """How often each of k problems is drawn in each resample (read-only: cells of one size and seed
    share it, so the report's hundreds of cells draw a few dozen matrices)."""
    draws = np.random.default_rng(seed).integers(0, k, size=(resamples, k))
    offsets = (draws + k * np.arange(resamples)[:, None]).ravel()
    counts = np.bincount(offsets, minlength=resamples * k).reshape(resamples, k).astype(float)
    counts.flags.writeable = False
    return counts


class ClusterBootstrap:
    """Resampled problem counts for one cell: ``resamples`` draws of its k problems with replacement
    (deterministic for a seed). ``sums(values)`` gives per-problem sums; ``interval`` evaluates a
    statistic on every resample's totals."""

    def __init__(self, clusters: Sequence[Hashable] | Clusters, *, resamples: int = RESAMPLES, seed: int = 0) -> None:
        numbered = clusters_of(clusters)
        if not numbered.index.size:
            raise ValueError("a bootstrap needs at least one observation")
        self.index, self.k = numbered.index, numbered.k
        self.counts = resampled_counts(self.k, resamples, seed)
        self._totals: dict[bytes, np.ndarray] = {}  # per-problem sums → their resampled totals

    def sums(self, values: Sequence[float] | np.ndarray) -> np.ndarray:
        """Per-problem sums of one value per observation."""
        return np.bincount(self.index, weights=np.asarray(values, dtype=np.float64), minlength=self.k)

    def replicates(self, statistic: Callable[..., np.ndarray], *columns: Sequence[float] | np.ndarray) -> np.ndarray:
        """``statistic`` of the resampled totals of each column (one value per resample; NaN where undefined)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(statistic(*self.totals([self.sums(c) for c in columns])), dtype=np.float64)

    def totals(self, sums: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Each resample's total of each column of per-problem ``sums`` (``counts @ s``, read-only),
        remembered: a cell's statistics share columns (above all the count of observations), and each
        product reads the whole resample matrix."""
        out = []
        for s in sums:
            key = s.tobytes()
            total = self._totals.get(key)
            if total is None:
                self._totals[key] = total = self.counts @ s
                total.flags.writeable = False
            out.append(total)
        return out

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
    return linear_quantiles(finite, (alpha, 1.0 - alpha))


def linear_quantiles(values: np.ndarray, quantiles: Sequence[float]) -> list[float]:
    """``np.quantile(values, quantiles)`` (its default, linear method), bit for bit, from one partition
    around the order statistics it needs: the report takes ~550 intervals, and np.quantile's generic
    path cost more than the bootstrap replicates themselves."""
    n = values.size
    virtual = [(n - 1) * float(q) for q in quantiles]
    below = [min(math.floor(v), n - 1) for v in virtual]  # at the top: the last value (numpy's -1)
    ordered = np.partition(values, sorted({*below, *(min(b + 1, n - 1) for b in below)}))
    out = []
    for v, b in zip(virtual, below, strict=True):
        low, high = float(ordered[b]), float(ordered[min(b + 1, n - 1)])
        t = v - math.floor(v)  # at the top low = high, so t does not matter
        difference = high - low
        out.append(high - difference * (1 - t) if t >= 0.5 else low + difference * t)
    return out


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


def cluster_t_interval(
    logs: Sequence[float] | np.ndarray, clusters: Sequence[Hashable] | Clusters, level: float = LEVEL
) -> Interval | None:
    """t interval of the paired lift: mean log r ± t(k−1) · SE, SE from the problems' residual sums
    (CR1: k/(k−1) Σ_c (S_c − m N_c)² / N²), mapped back by exp − 1. None with fewer than 2 problems."""
    from mkbsim.metrics._tdist import t_quantile

    index, k = (numbered := clusters_of(clusters)).index, numbered.k
    if k < 2:
        return None
    x = np.asarray(logs, dtype=np.float64)
    n = x.size
    mean = math.fsum(x.tolist()) / n
    residual = np.bincount(index, weights=x - mean, minlength=k)
    se = math.sqrt(k / (k - 1) * float(residual @ residual)) / n
    half = t_quantile(0.5 + level / 2.0, k - 1) * se
    return [math.expm1(mean - half), math.expm1(mean + half)]


def sign_flip_p(
    values: Sequence[float] | np.ndarray, clusters: Sequence[Hashable] | Clusters, *, seed: int = 0
) -> float | None:
    """Two-sided p of "mean = 0" with each problem's sum of ``values`` flipped as a whole: exact over all
    2^k flips up to EXACT_FLIPS_MAX problems, else FLIPS random flips plus the observed one. None when
    every problem's sum is 0."""
    index, k = (numbered := clusters_of(clusters)).index, numbered.k
    sums = np.bincount(index, weights=np.asarray(values, dtype=np.float64), minlength=k)
    sums = sums[sums != 0]
    if sums.size == 0:
        return None
    observed = abs(math.fsum(sums)) * (1.0 - 1e-12)  # flips equal up to rounding count as extreme
    if sums.size <= EXACT_FLIPS_MAX:
        bits = (np.arange(2**sums.size)[:, None] >> np.arange(sums.size)) & 1
        flipped = np.abs((1 - 2 * bits) @ sums)
        return float(np.count_nonzero(flipped >= observed) / flipped.size)
    # one random bit per problem and draw, from random bytes (drawing ±1 as integers cost 5× the test);
    # flipping the problems marked 1 turns the total S into S − 2 · (their sum)
    packed = np.random.default_rng(seed).integers(0, 256, size=(FLIPS, (sums.size + 7) // 8), dtype=np.uint8)
    flipped = np.abs(sums.sum() - 2.0 * _marked_sums(packed, sums))
    return float((1 + np.count_nonzero(flipped >= observed)) / (FLIPS + 1))


def _marked_sums(packed: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """Per row of ``packed`` (bit i, most significant first as ``np.unpackbits`` reads them, marks
    ``sums[i]``): the sum of the marked values. Each byte's 256 possible partial sums are tabled once
    and looked up per row: unpacking the bits into a float matrix for a product cost 5x as much."""
    bits = ((np.arange(256)[:, None] >> np.arange(7, -1, -1)) & 1).astype(np.float64)  # 256 × 8
    padded = np.zeros(8 * packed.shape[1])
    padded[: sums.size] = sums
    tables = padded.reshape(-1, 8) @ bits.T  # per byte, the partial sum of each of its 256 values
    total = np.zeros(packed.shape[0])
    for table, column in zip(tables, np.ascontiguousarray(packed.T), strict=True):
        total += table.take(column)
    return total


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
