"""Aggregate statistics: paired lift, help/harm rates, sign and Wilcoxon tests
(hand-computed, and against scipy)."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from mkbsim.metrics import (
    geometric_mean,
    harm_rate,
    help_rate,
    paired_lift,
    sign_test_p,
    wilcoxon_signed_rank_p,
)
from mkbsim.metrics._stats import EXACT_WITH_TIES_MAX_N, lift_of_logs


def test_paired_lift_is_the_geometric_mean_minus_one() -> None:
    assert paired_lift([0.25, 4.0]) == 0.0  # a rescue and a break cancel exactly
    assert paired_lift([4.0]) == pytest.approx(3.0, rel=1e-15)
    assert paired_lift([0.25]) == pytest.approx(-0.75, rel=1e-15)
    assert paired_lift([4.0, 4.0, 0.25]) == pytest.approx(4 ** (1 / 3) - 1, rel=1e-15)
    assert paired_lift([1.25, 4.0, 0.8]) == pytest.approx(4 ** (1 / 3) - 1, rel=1e-15)
    assert paired_lift([2.0, 0.5, 1.0, 1.0]) == 0.0
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0, rel=1e-15)
    assert lift_of_logs([math.log(4.0), math.log(0.25)]) == 0.0
    with pytest.raises(ValueError):
        paired_lift([])


def test_help_and_harm_rates_count_the_boundaries() -> None:
    ratios = [1.25, 0.8, 1.0, 4.0, 0.25, 1.2499, 0.8001, 0.3 / 0.24]
    assert help_rate(ratios) == 3 / 8  # 1.25, 4, 0.3/0.24
    assert harm_rate(ratios) == 2 / 8  # 0.8, 0.25
    with pytest.raises(ValueError):
        help_rate([])


@given(r=st.floats(min_value=0.25, max_value=4.0), n=st.integers(1, 30))
def test_lift_of_identical_comparisons_is_r_minus_one_and_zero_for_r_1(r: float, n: int) -> None:
    assert paired_lift([r] * n) == pytest.approx(r - 1, rel=1e-12, abs=1e-15)
    assert paired_lift([1.0] * n) == 0.0


def test_sign_test_hand_computed() -> None:
    assert sign_test_p([1.0, 1.0]) == 0.5  # 2 of 2 positive: 2 × 1/4
    assert sign_test_p([1.0, 1.0, 1.0, -1.0]) == 2 * 5 / 16  # P(X <= 1 | n = 4) = 5/16
    assert sign_test_p([1.0, -1.0, 0.0]) == 1.0
    assert sign_test_p([0.0, 0.0]) is None
    assert sign_test_p([2.0] * 10) == 2 / 1024


def test_wilcoxon_hand_computed() -> None:
    log4 = math.log(4.0)
    assert wilcoxon_signed_rank_p([log4, -log4, 0.0]) == 1.0  # two tied magnitudes of opposite sign
    assert wilcoxon_signed_rank_p([log4, 0.0, log4]) == 0.5  # T+ = 3 of 3 over 4 equally likely flips
    assert wilcoxon_signed_rank_p([1.0, 2.0, 3.0]) == 0.25  # T+ = 6 of {0..6}: P = 1/8 per tail
    assert wilcoxon_signed_rank_p([0.0]) is None


finite = st.floats(min_value=-3, max_value=3, allow_nan=False, allow_infinity=False)
clipped = st.sampled_from([0.0, math.log(4.0), -math.log(4.0), math.log(1.25), math.log(0.8), 0.1, -0.7])


def permutation_tested(values: list[float]) -> bool:
    """Where scipy's ``wilcoxon`` runs an exact permutation test (ties or zeros, at most
    ``EXACT_WITH_TIES_MAX_N`` values) over lists long enough for it to take a tenth of a second or more (2**n
    statistics: n = 8 about 0.05 s, 13 about 1 s, on a quiet machine)."""
    magnitudes = [abs(v) for v in values]
    tied = 0.0 in magnitudes or len(set(magnitudes)) < len(magnitudes)
    return tied and 8 <= len(values) <= EXACT_WITH_TIES_MAX_N


def assert_matches_scipy(values: list[float]) -> None:
    import warnings

    from scipy import stats

    mine = wilcoxon_signed_rank_p(values)
    if all(v == 0 for v in values):
        assert mine is None and sign_test_p(values) is None
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns about ties and small samples
        expected = stats.wilcoxon(values).pvalue
    assert mine == pytest.approx(expected, rel=1e-9, abs=1e-12)
    positive, negative = sum(v > 0 for v in values), sum(v < 0 for v in values)
    assert sign_test_p(values) == pytest.approx(stats.binomtest(positive, positive + negative).pvalue, rel=1e-9)


@settings(max_examples=300, deadline=None)
@given(values=st.one_of(st.lists(finite, min_size=1, max_size=70), st.lists(clipped, min_size=1, max_size=70)))
def test_tests_match_scipy(values: list[float]) -> None:
    # every branch (exact without ties to 50 values, exact with ties, the normal approximation with and without
    # ties from 14 values), but the lists scipy takes seconds over: the next test samples those
    assume(not permutation_tested(values))
    assert_matches_scipy(values)


@settings(max_examples=8, deadline=None)
@given(values=st.lists(clipped, min_size=8, max_size=EXACT_WITH_TIES_MAX_N + 1))
@example(values=[0.1, -0.1, 0.7, 0.7, -0.7, 0.1, 1.2, -1.2, 0.1, 0.0, 0.7, 0.1, -0.7])  # the exact branch's last n
@example(values=[0.1, -0.1, 0.7, 0.7, -0.7, 0.1, 1.2, -1.2, 0.1, 0.0, 0.7, 0.1, -0.7, 0.7])  # the approximation's first
def test_tests_match_scipy_where_it_permutes(values: list[float]) -> None:
    # ties (every list of 8 of ``clipped`` ties: 4 magnitudes besides 0) over 8 to 14 values: scipy's permutation
    # test to 13, its normal approximation at 14, so a bound moved either way fails
    assert_matches_scipy(values)
