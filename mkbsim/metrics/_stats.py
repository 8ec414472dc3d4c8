"""Aggregate statistics over comparison ratios: paired lift, help/harm rates, and paired sign /
Wilcoxon signed-rank tests (intervals and cluster-aware tests: ``mkbsim.metrics._clusters``). Pure
functions, no store access.

The two tests mirror ``scipy.stats.binomtest(k, n, 0.5)`` and ``scipy.stats.wilcoxon(x)`` (defaults:
zeros dropped, no continuity correction, exact null distribution for small samples) and are checked
against scipy in the tests. They are written out here because importing scipy.stats takes 0.7-1.1 s on
the project's machine, more than the whole report's budget.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from mkbsim.metrics._rules import outcome

#: scipy's rule: exact null distribution up to 50 values without ties or zeros, and up to 13 values
#: with them (all 2**13 sign flips enumerated); the normal approximation beyond.
EXACT_MAX_N = 50
EXACT_WITH_TIES_MAX_N = 13


def geometric_mean(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("geometric mean of no values")
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))


def paired_lift(ratios: Sequence[float]) -> float:
    """Geometric mean of r, minus 1."""
    return geometric_mean(ratios) - 1.0


def lift_of_logs(log_ratios: Sequence[float]) -> float:
    """``paired_lift`` from log ratios (a report computes those once per cell, for the tests as well)."""
    if not log_ratios:
        raise ValueError("paired lift of no comparisons")
    return math.exp(math.fsum(log_ratios) / len(log_ratios)) - 1.0


def help_rate(ratios: Sequence[float]) -> float:
    """Share of comparisons with r >= 5/4."""
    return sum(1 for r in ratios if outcome(r) == "helped") / _count(ratios)


def harm_rate(ratios: Sequence[float]) -> float:
    """Share of comparisons with r <= 4/5."""
    return sum(1 for r in ratios if outcome(r) == "harmed") / _count(ratios)


def _count(values: Sequence[float]) -> int:
    if not values:
        raise ValueError("a rate over no comparisons")
    return len(values)


def sign_test_p(values: Sequence[float]) -> float | None:
    """Two-sided exact sign test of ``values`` against 0 (zeros dropped); None when all are zero."""
    positive = sum(1 for v in values if v > 0)
    negative = sum(1 for v in values if v < 0)
    n = positive + negative
    if n == 0:
        return None
    if positive == negative:
        return 1.0
    term = tail = 1  # C(n, 0); exact integers, each term from the last (math.comb per term is quadratic)
    for k in range(min(positive, negative)):
        term = term * (n - k) // (k + 1)
        tail += term
    return min(1.0, 2 * tail / 2**n)


def wilcoxon_signed_rank_p(values: Sequence[float]) -> float | None:
    """Two-sided Wilcoxon signed-rank test of ``values`` against 0; None when all are zero."""
    nonzero = [v for v in values if v != 0]
    n = len(nonzero)
    if n == 0:
        return None
    doubled_ranks, tie_sizes = _doubled_average_ranks([abs(v) for v in nonzero])
    doubled_plus = sum(r for r, v in zip(doubled_ranks, nonzero, strict=True) if v > 0)
    has_ties = any(t > 1 for t in tie_sizes)
    if (len(values) <= EXACT_MAX_N and not has_ties and n == len(values)) or len(values) <= EXACT_WITH_TIES_MAX_N:
        return _exact_signed_rank_p(doubled_ranks, doubled_plus)
    mean = n * (n + 1) / 4
    tie_correction = sum(t**3 - t for t in tie_sizes)
    sd = math.sqrt((n * (n + 1) * (2 * n + 1) - tie_correction / 2) / 24)
    z = (doubled_plus / 2 - mean) / sd
    return min(1.0, math.erfc(abs(z) / math.sqrt(2)))


def _doubled_average_ranks(magnitudes: list[float]) -> tuple[list[int], list[int]]:
    """Twice the average ranks (integers, so sums stay exact) and the size of each tie group."""
    order = sorted(range(len(magnitudes)), key=magnitudes.__getitem__)
    doubled = [0] * len(magnitudes)
    tie_sizes = []
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and magnitudes[order[end + 1]] == magnitudes[order[start]]:
            end += 1
        for k in range(start, end + 1):
            doubled[order[k]] = start + end + 2  # 2 × mean of the 1-based ranks start+1 … end+1
        tie_sizes.append(end - start + 1)
        start = end + 1
    return doubled, tie_sizes


def _exact_signed_rank_p(doubled_ranks: list[int], doubled_plus: int) -> float:
    """Exact two-sided p over all 2**n equally likely sign assignments (counts are exact integers)."""
    import numpy as np

    counts = np.zeros(sum(doubled_ranks) + 1, dtype=np.int64)
    counts[0] = 1
    for w in doubled_ranks:  # each value adds its rank to the sum or not
        counts[w:] += counts[:-w].copy()
    total = 2 ** len(doubled_ranks)
    at_most = int(counts[: doubled_plus + 1].sum())
    at_least = int(counts[doubled_plus:].sum())
    return min(1.0, 2 * min(at_most, at_least) / total)
