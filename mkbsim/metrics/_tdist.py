"""Student's t distribution for integer degrees of freedom, from its closed form (Abramowitz & Stegun
26.7.3-4), so the report's small-cell interval needs no scipy (``import scipy.stats`` alone costs about a
second on the project's machine, the whole report's budget). Checked against scipy in the tests."""

from __future__ import annotations

import functools
import math


def t_within(t: float, df: int) -> float:
    """P(|T| <= t) for T ~ Student t with ``df`` (a positive integer) degrees of freedom."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be a positive integer, got {df}")
    theta = math.atan(abs(t) / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 0:  # sin θ (1 + 1/2 cos² + 1·3/(2·4) cos⁴ + … up to cos^(df−2))
        term = total = 1.0
        for j in range(1, df // 2):
            term *= c2 * (2 * j - 1) / (2 * j)
            total += term
        return s * total
    if df == 1:
        return 2.0 * theta / math.pi
    term = total = math.cos(theta)  # (2/π)(θ + sin θ (cos + 2/3 cos³ + … up to cos^(df−2)))
    for j in range(1, (df - 1) // 2):
        term *= c2 * (2 * j) / (2 * j + 1)
        total += term
    return 2.0 / math.pi * (theta + s * total)


@functools.lru_cache(maxsize=256)  # the report asks for the same few (level, problems − 1) in many cells
def t_quantile(q: float, df: int) -> float:
    """The q-quantile (0.5 < q < 1) of Student's t, by bisection of ``t_within`` to machine precision."""
    if not 0.5 < q < 1.0:
        raise ValueError(f"quantile level must lie in (0.5, 1), got {q}")
    target = 2.0 * q - 1.0
    lo, hi = 0.0, 1.0
    while t_within(hi, df) < target:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if mid in (lo, hi):
            break
        if t_within(mid, df) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0
