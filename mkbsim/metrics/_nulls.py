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
Each p is two-sided about the null's exact expectation, with PERMUTATIONS draws plus the observation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mkbsim.metrics._clusters import two_sided_p

PERMUTATIONS = 4999


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
    size = (PERMUTATIONS, c.n.size)
    in_above = rng.hypergeometric(c.marked, c.n - c.marked, c.above, size=size)
    left = c.marked - in_above
    in_below = rng.hypergeometric(left, c.n - c.above - left, c.below, size=size)
    null = in_above.sum(axis=1) / above - in_below.sum(axis=1) / below
    expected = float((c.marked * c.above / c.n).sum() / above - (c.marked * c.below / c.n).sum() / below)
    observed = int(c.marked_above.sum()) / above - int(c.marked_below.sum()) / below
    return two_sided_p(null, observed, expected)


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
