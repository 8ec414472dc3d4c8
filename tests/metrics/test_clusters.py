"""Cluster-aware uncertainty: the bootstrap over problems, the small-cell t interval (and its coverage
against the percentile bootstrap at 8-10 problems), sign flips, Holm/BH, and the permutation nulls."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from mkbsim.metrics import _nulls
from mkbsim.metrics._clusters import (
    ClusterBootstrap,
    _marked_sums,
    adjust,
    cluster_t_interval,
    lift_of_sums,
    percentile_interval,
    ratio_of_sums,
    sign_flip_p,
)
from mkbsim.metrics._nulls import PairTables, StandingCounts, asymmetry_p, standing_gap_p
from mkbsim.metrics._tdist import t_quantile


def lift_ci(ratios: list[float], problems: list[str], **kw: int) -> list[float] | None:
    boot = ClusterBootstrap(problems, **kw)
    return boot.interval(lift_of_sums, [math.log(r) for r in ratios], [1.0] * len(ratios))


def test_bootstrap_resamples_problems_and_is_deterministic() -> None:
    ci = lift_ci([4.0, 4.0, 0.25, 1.0], ["p1", "p1", "p2", "p3"], seed=7)
    # the extremes are the single-problem lifts: all p2 (-75%) and all p1 (+300%), each drawn with p = 1/27
    assert ci == pytest.approx([-0.75, 3.0])
    assert lift_ci([1.25, 1.25], ["p", "p"]) == pytest.approx([0.25, 0.25])  # one problem: no spread
    spread, labels = [0.3 + 0.1 * i for i in range(30)], [f"p{i}" for i in range(30)]
    assert lift_ci(spread, labels, seed=7) == lift_ci(spread, labels, seed=7)
    assert lift_ci(spread, labels, seed=7) != lift_ci(spread, labels, seed=8)


def test_cells_of_one_size_share_a_read_only_resample_matrix() -> None:
    first = ClusterBootstrap(["a", "b", "a", "c"])
    second = ClusterBootstrap(["x", "y", "z"])
    assert first.counts is second.counts  # common random numbers: drawn once per size and seed
    assert first.counts.sum(axis=1).tolist() == [3.0] * first.counts.shape[0]
    with pytest.raises(ValueError, match="read-only"):
        first.counts[0, 0] = 99.0  # a caller cannot change the resamples every other cell uses


def test_bootstrap_keeps_a_problems_comparisons_together() -> None:
    # p1 always contributes both of its comparisons: a resample of p1 alone has lift exactly 0
    assert lift_ci([4.0, 0.25, 2.0], ["p1", "p1", "p2"], resamples=4000, seed=1) == pytest.approx([0.0, 1.0], abs=1e-12)


def test_rates_share_the_resamples_and_undefined_statistics_give_none() -> None:
    boot = ClusterBootstrap(["a", "b", "c", "d"], seed=3)
    helped = [1.0, 0.0, 1.0, 0.0]
    ci = boot.interval(ratio_of_sums, helped, [1.0] * 4)
    assert ci is not None and 0.0 <= ci[0] <= 0.5 <= ci[1] <= 1.0
    # one problem in the denominator: defined where it is drawn (1 − (3/4)^4 of resamples), always 1 there
    assert boot.interval(ratio_of_sums, [1.0, 0, 0, 0], [1.0, 0, 0, 0]) == [1.0, 1.0]
    assert boot.interval(ratio_of_sums, [0.0] * 4, [0.0] * 4) is None  # undefined everywhere
    assert percentile_interval(np.array([np.nan, 1.0])) == [1.0, 1.0]


@pytest.mark.parametrize("df", [1, 2, 3, 7, 8, 9, 10, 19, 40])
def test_t_quantile_matches_scipy(df: int) -> None:
    from scipy import stats

    for q in (0.9, 0.975, 0.995):
        assert t_quantile(q, df) == pytest.approx(stats.t.ppf(q, df), rel=1e-10)


def test_t_interval_is_the_cluster_robust_one() -> None:
    from scipy import stats

    logs = [0.1, -0.3, 0.5, 0.2, 0.0]
    lo, hi = cluster_t_interval(logs, ["a", "b", "c", "d", "e"]) or (0, 0)
    half = stats.t.ppf(0.975, 4) * stats.tstd(logs) / math.sqrt(5)
    assert (lo, hi) == pytest.approx((math.expm1(0.1 - half), math.expm1(0.1 + half)), rel=1e-12)
    # two replicates of a problem count once: the same interval as their per-problem means (balanced)
    doubled = cluster_t_interval([v for v in logs for _ in range(2)], [p for p in "abcde" for _ in range(2)])
    assert doubled == pytest.approx([lo, hi], rel=1e-12)
    assert cluster_t_interval([0.1, 0.2], ["a", "a"]) is None


def test_small_cell_t_interval_covers_better_than_the_percentile_bootstrap() -> None:
    """At 8-10 problems (two replicates each, correlated within the problem) the percentile bootstrap
    under-covers a 95% interval; the cluster t interval comes close to nominal."""
    rng = np.random.default_rng(2024)
    edge = math.log(4.0)

    def draw(k: int) -> np.ndarray:  # log r: a problem effect, runtime noise, verdict flips and joint failures
        effect = rng.normal(0.05, 0.35, size=(k, 1))
        x = np.clip(effect + rng.normal(0.0, 0.45, size=(k, 2)), -edge, edge)
        u = rng.random((k, 2))
        return np.where(u < 0.1, edge, np.where(u < 0.2, -edge, np.where(u < 0.35, 0.0, x)))

    truth = float(draw(400_000).mean())
    for k in (8, 10):
        covered = {"t": 0, "percentile": 0}
        trials = 300
        for trial in range(trials):
            x = draw(k)
            logs, problems = x.ravel().tolist(), [p for p in range(k) for _ in range(2)]
            boot = ClusterBootstrap(problems, resamples=1000, seed=trial)
            for name, ci in (("t", cluster_t_interval(logs, problems)),
                             ("percentile", boot.interval(lift_of_sums, logs, [1.0] * len(logs)))):  # fmt: skip
                assert ci is not None
                covered[name] += math.log1p(ci[0]) <= truth <= math.log1p(ci[1])
        t_cover, p_cover = covered["t"] / trials, covered["percentile"] / trials
        assert t_cover >= 0.92 and t_cover - p_cover >= 0.03, (k, t_cover, p_cover)


def test_sign_flips_exact_and_monte_carlo() -> None:
    assert sign_flip_p([1.0, 1.0, 1.0], ["a", "b", "c"]) == 2 / 8
    assert sign_flip_p([1.0, -1.0, 2.0, 1.0], ["a", "a", "b", "c"]) == 2 / 4  # a sums to 0 and drops out
    assert sign_flip_p([0.0, 0.0], ["a", "b"]) is None
    values = [0.3, -0.1, 0.4, 0.2, 0.25, -0.05, 0.5, 0.1, 0.15, 0.3, -0.2, 0.35, 0.05, 0.45]  # 14 problems
    exact = sum(abs(sum(s * v for s, v in zip(signs, values, strict=True))) >= sum(values) - 1e-12
                for signs in itertools.product((1, -1), repeat=len(values))) / 2 ** len(values)  # fmt: skip
    assert sign_flip_p(values, [str(i) for i in range(14)], seed=5) == pytest.approx(exact, abs=0.006)


def test_marked_sums_by_byte_tables_equal_the_unpacked_bits_product() -> None:
    rng = np.random.default_rng(4)
    for k in (13, 16, 17, 74):  # whole bytes and a last byte partly used
        sums = rng.normal(size=k)
        packed = rng.integers(0, 256, size=(500, (k + 7) // 8), dtype=np.uint8)
        expected = np.unpackbits(packed, axis=1, count=k) @ sums
        assert _marked_sums(packed, sums) == pytest.approx(expected, rel=0, abs=1e-12)


def test_bootstrap_totals_are_the_resample_products_remembered_per_column() -> None:
    problems = [f"p{i % 9}" for i in range(40)]
    boot = ClusterBootstrap(problems, resamples=300, seed=2)
    values = np.linspace(-1.0, 2.0, 40)
    ones, sums = boot.sums(np.ones(40)), boot.sums(values)
    first, again, other = boot.totals([ones, ones.copy(), sums])
    assert first is again  # equal sums: one product
    assert np.array_equal(first, boot.counts @ ones) and np.array_equal(other, boot.counts @ sums)
    with pytest.raises(ValueError, match="read-only"):
        other[0] = 0.0  # shared between the cell's statistics


def test_holm_and_bh_match_statsmodels() -> None:
    from statsmodels.stats.multitest import multipletests

    ps = [0.01, 0.04, 0.03, 0.2, 0.005, 0.5]
    holm, bh = adjust([*ps[:3], None, *ps[3:]])
    assert holm[3] is None and bh[3] is None
    assert [h for h in holm if h is not None] == pytest.approx(list(multipletests(ps, method="holm")[1]))
    assert [b for b in bh if b is not None] == pytest.approx(list(multipletests(ps, method="fdr_bh")[1]))


def _shuffled_p(observed: float, draws: list[float]) -> float:
    center = float(np.mean(draws))
    return (1 + sum(abs(d - center) >= abs(observed - center) - 1e-12 for d in draws)) / (len(draws) + 1)


@pytest.mark.parametrize("table_max", [_nulls.TABLE_MAX, 0])  # tables of the joint null, hypergeometric variates
def test_standing_null_is_the_within_problem_shuffle(table_max: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_nulls, "TABLE_MAX", table_max)
    rng = np.random.default_rng(0)
    # three problems: labels (a above, s same, b below) and outcomes (1 = marked)
    labels = [list("aabsb"), list("abbs"), list("aaasbbb")]
    marked = [[1, 1, 0, 0, 0], [1, 0, 0, 1], [1, 1, 0, 1, 0, 0, 0]]

    def gap(lab: list[list[str]]) -> float:
        pairs = [(x, m) for ls, ms in zip(lab, marked, strict=True) for x, m in zip(ls, ms, strict=True)]
        above = [m for x, m in pairs if x == "a"]
        below = [m for x, m in pairs if x == "b"]
        return sum(above) / len(above) - sum(below) / len(below)

    draws = [gap([list(rng.permutation(ls)) for ls in labels]) for _ in range(20_000)]
    counts = StandingCounts(*(np.array(v) for v in zip(*[
        (len(ls), sum(ms), ls.count("a"), ls.count("b"),
         sum(m for x, m in zip(ls, ms, strict=True) if x == "a"),
         sum(m for x, m in zip(ls, ms, strict=True) if x == "b"))
        for ls, ms in zip(labels, marked, strict=True)], strict=True)))  # fmt: skip
    assert standing_gap_p(counts, seed=1) == pytest.approx(_shuffled_p(gap(labels), draws), abs=0.02)


def test_asymmetry_null_is_the_shuffle_of_reverse_outcomes() -> None:
    rng = np.random.default_rng(0)
    first = ["helped"] * 6 + ["harmed"] * 4 + ["neutral"] * 5
    second = ["harmed"] * 4 + ["helped"] * 2 + ["helped"] * 3 + ["neutral"] * 6

    def stat(b: list[str]) -> float:
        helped = sum(x == "helped" for x in first) + sum(y == "helped" for y in b)
        num = sum((x == "helped") * ((y == "harmed") - (y == "helped")) + (y == "helped") * ((x == "harmed") -
                  (x == "helped")) for x, y in zip(first, b, strict=True))  # fmt: skip
        return num / helped

    draws = [stat(list(rng.permutation(second))) for _ in range(20_000)]
    cell = {(x, y): sum(1 for a, b in zip(first, second, strict=True) if (a, b) == (x, y))
            for x in ("helped", "harmed") for y in ("helped", "harmed")}  # fmt: skip
    tables = PairTables(
        pairs=np.array([15]), rows_helped=np.array([6]), rows_harmed=np.array([4]),
        cols_helped=np.array([5]), cols_harmed=np.array([4]), helped_helped=np.array([cell["helped", "helped"]]),
        helped_harmed=np.array([cell["helped", "harmed"]]), harmed_helped=np.array([cell["harmed", "helped"]]),
    )  # fmt: skip
    assert asymmetry_p(tables, seed=1) == pytest.approx(_shuffled_p(stat(second), draws), abs=0.02)


def test_intervals_do_not_depend_on_the_order_observations_arrive_in() -> None:
    # a resumed campaign stores its attempts in another order than an uninterrupted run of the same seed
    rng = np.random.default_rng(5)
    problems = [f"p{i:02d}" for i in rng.integers(0, 15, size=120)]
    logs = rng.normal(0.1, 0.5, size=120)
    order = rng.permutation(120)
    shuffled_problems = [problems[i] for i in order]
    first = ClusterBootstrap(problems).interval(lift_of_sums, logs, np.ones(120))
    second = ClusterBootstrap(shuffled_problems).interval(lift_of_sums, logs[order], np.ones(120))
    assert first is not None and second == pytest.approx(first, rel=1e-12)
    assert sign_flip_p(list(logs), problems) == sign_flip_p(list(logs[order]), shuffled_problems)


def test_standing_null_tables_are_the_exact_joint_of_marked_above_and_below() -> None:
    from itertools import combinations

    from mkbsim.metrics._nulls import _marked_above_below

    # per problem: comparisons, marked, above, below (the rest stand the same)
    problems = [(5, 2, 2, 2), (4, 3, 1, 2), (7, 0, 3, 3), (6, 6, 2, 1), (8, 3, 4, 0)]
    counts = StandingCounts(*(np.array(v) for v in zip(*[(n, m, a, b, 0, 0) for n, m, a, b in problems],
                                                      strict=True)))  # fmt: skip
    values, cumulative, starts, ends = _marked_above_below(counts, above=12, below=8)
    probability = np.diff(cumulative)
    for (n, m, a, b), start, end in zip(problems, starts, ends, strict=True):
        exact: dict[float, float] = {}
        for chosen in combinations(range(n), m):  # marked positions; 0..a-1 above, a..a+b-1 below
            x, y = sum(i < a for i in chosen), sum(a <= i < a + b for i in chosen)
            exact[x / 12 - y / 8] = exact.get(x / 12 - y / 8, 0.0) + 1.0
        total = sum(exact.values())
        tabled: dict[float, float] = {}
        for v, p in zip(values[start:end], probability[start:end], strict=True):
            tabled[v] = tabled.get(v, 0.0) + p
        assert {v: p for v, p in tabled.items() if p > 0} == pytest.approx({v: c / total for v, c in exact.items()})


def test_linear_quantiles_are_numpys_bit_for_bit() -> None:
    from mkbsim.metrics._clusters import linear_quantiles

    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 7, 40, 1999, 2000):
        for values in (rng.normal(size=n), rng.integers(0, 5, size=n).astype(float), np.full(n, 0.3)):
            for quantiles in ((0.025, 0.975), (0.0, 1.0), (0.5,), (0.1, 0.1)):
                assert linear_quantiles(values.copy(), quantiles) == list(np.quantile(values, quantiles))
