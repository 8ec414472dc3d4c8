"""Permutation nulls for the standing gradient and the direction asymmetry (DESIGN §6), drawn as the
permutations' count tables (hypergeometric draws): thousands of permutations cost milliseconds.

- Standing: within each problem, the standing labels (above / same / below) are shuffled over that
  problem's comparisons. Under the null, where the source stands says nothing about the outcome beyond
  what the problem does. Statistic: the share of marked comparisons (helped, or harmed) among "above"
  minus that among "below".
- Asymmetry: within each model, the reverse direction's outcomes are shuffled over the model's pairs
  (same campaign, problem, replicate). Under the null, a helped comparison's reverse fares like any
  reverse comparison. Statistic: among helped comparisons with a resolved reverse, the reverse's harmed
  share minus its helped share.
Each p is two-sided about the null's exact expectation, with PERMUTATIONS draws plus the observation:
999, the usual count for a test at 5% (p in steps of 1/1000; Holm over a table's 7 rows still reaches
0.007). The standing table makes 14 nulls, each of 999 draws per problem: a draw is one uniform into a
table of that problem's exact joint null (multivariate hypergeometric) where the tables are small (the
per-model rows), else two hypergeometric variates (the pooled row, whose tables would be large). Either
way the draws are exact permutations' counts; the two differ only in which random numbers they use.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mkbsim.metrics._clusters import two_sided_p

PERMUTATIONS = 999
#: the standing null draws from tables of every problem's joint null up to this many entries in all (a
#: uniform per problem and permutation, 25× cheaper than numpy's hypergeometric variates, but the tables
#: grow with the square of the comparisons per problem), and as hypergeometric variates beyond
TABLE_MAX = 1 << 16


@dataclass(frozen=True)
class StandingCounts:
    """Per problem: comparisons with a standing, marked ones, above, below, marked above, marked below."""

    n: np.ndarray
    marked: np.ndarray
    above: np.ndarray
    below: np.ndarray
    marked_above: np.ndarray
    marked_below: np.ndarray


def standing_gap_p(c: StandingCounts, *, seed: int = 0) -> float | None:
    """p of (marked share among above − marked share among below) = its value under the null."""
    above, below = int(c.above.sum()), int(c.below.sum())
    if not above or not below:
        return None
    rng = np.random.default_rng(seed)
    sizes = (np.minimum(c.above, c.marked) + 1) * (np.minimum(c.below, c.marked) + 1)
    if sizes.sum() <= TABLE_MAX:
        # inverse CDF: one uniform per problem and permutation picks that problem's (above, below) counts
        values, cumulative, starts, ends = _marked_above_below(c, above, below)
        u = rng.random((c.n.size, PERMUTATIONS))
        low, high = cumulative[starts, None], cumulative[ends, None]
        targets = low + u * (high - low)
        # each problem's draws searched in its own stretch of the table (the same positions as one search
        # of the whole table: a target lies between its stretch's first and last running sums)
        picked = np.empty(targets.shape, dtype=np.intp)
        for row, (start, end) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
            picked[row] = np.searchsorted(cumulative[start : end + 1], targets[row], side="right")
        picked = np.minimum(picked + (starts - 1)[:, None], ends[:, None] - 1)
        null = values[picked].sum(axis=0)
    else:
        size = (PERMUTATIONS, c.n.size)
        in_above = rng.hypergeometric(c.marked, c.n - c.marked, c.above, size=size)
        left = c.marked - in_above
        in_below = rng.hypergeometric(left, c.n - c.above - left, c.below, size=size)
        null = in_above.sum(axis=1) / above - in_below.sum(axis=1) / below
    expected = float((c.marked * c.above / c.n).sum() / above - (c.marked * c.below / c.n).sum() / below)
    observed = int(c.marked_above.sum()) / above - int(c.marked_below.sum()) / below
    return two_sided_p(null, observed, expected)


def _marked_above_below(
    c: StandingCounts, above: int, below: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every problem's joint null of (marked among above, marked among below), the multivariate
    hypergeometric of its marked comparisons over the above / below / same labels, laid out flat, one
    problem after another: each (x, y)'s contribution x/above − y/below to the statistic, the running
    sum of the probabilities (with a leading 0: entry i + 1 sums positions up to i), and each problem's
    first and last-plus-one position. Drawing from these tables costs a uniform per problem; numpy's
    hypergeometric variates cost 25× as much (two per problem, 999 permutations, 14 nulls a report)."""
    n, m, a, b = (np.asarray(v, dtype=np.int64) for v in (c.n, c.marked, c.above, c.below))
    xs, ys = np.minimum(a, m) + 1, np.minimum(b, m) + 1  # marked among above (below) is at most both
    sizes = xs * ys
    problem = np.repeat(np.arange(n.size), sizes)
    local = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    x, y = local // ys[problem], local % ys[problem]
    rest = m[problem] - x - y  # marked among the "same" comparisons
    same = n[problem] - a[problem] - b[problem]
    feasible = (rest >= 0) & (rest <= same)
    log_factorial = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, int(n.max()) + 1)))))

    def log_choose(total: np.ndarray, k: np.ndarray) -> np.ndarray:
        k = np.clip(k, 0, total)
        return log_factorial[total] - log_factorial[k] - log_factorial[total - k]

    log_p = (log_choose(a[problem], x) + log_choose(b[problem], y) + log_choose(same, rest)
             - log_choose(n, m)[problem])  # fmt: skip
    probability = np.where(feasible & (x <= a[problem]) & (y <= b[problem]), np.exp(log_p), 0.0)
    cumulative = np.concatenate(([0.0], np.cumsum(probability)))
    ends = np.cumsum(sizes)
    return x / above - y / below, cumulative, ends - sizes, ends


@dataclass(frozen=True)
class PairTables:
    """Per model (stratum): pairs with both directions resolved; direction A's helped and harmed counts
    (rows), direction B's (columns); and the observed cells helped/helped, helped/harmed, harmed/helped."""

    pairs: np.ndarray
    rows_helped: np.ndarray
    rows_harmed: np.ndarray
    cols_helped: np.ndarray
    cols_harmed: np.ndarray
    helped_helped: np.ndarray
    helped_harmed: np.ndarray
    harmed_helped: np.ndarray


def asymmetry_p(t: PairTables, *, seed: int = 0) -> float | None:
    """p of (reverse harmed − reverse helped) / helped-with-a-reverse = its value under the null."""
    helped = int(t.rows_helped.sum() + t.cols_helped.sum())
    if not helped:
        return None
    rng = np.random.default_rng(seed)
    size = (PERMUTATIONS, t.pairs.size)
    hh = rng.hypergeometric(t.cols_helped, t.pairs - t.cols_helped, t.rows_helped, size=size)
    hm = rng.hypergeometric(t.cols_harmed, t.pairs - t.cols_helped - t.cols_harmed, t.rows_helped - hh, size=size)
    left = t.cols_helped - hh
    mh = rng.hypergeometric(left, t.pairs - t.rows_helped - left, t.rows_harmed, size=size)
    null = (hm + mh - 2 * hh).sum(axis=1) / helped
    share = 1.0 / t.pairs
    expected = float((t.rows_helped * t.cols_harmed * share + t.rows_harmed * t.cols_helped * share
                      - 2 * t.rows_helped * t.cols_helped * share).sum() / helped)  # fmt: skip
    observed = int((t.helped_harmed + t.harmed_helped - 2 * t.helped_helped).sum()) / helped
    return two_sided_p(null, observed, expected)
