"""DESIGN §6 rules, hand-computed: ratio (clip, rescue, break, joint failure, skipped), outcome at the
exact 5/4 and 4/5 boundaries, verdict changes, tiers at the thresholds, standing."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mkbsim.metrics import (
    direction_of_arm,
    outcome,
    ratio,
    reverse_direction,
    scored_pass,
    standing,
    tier,
    verdict_change,
)


@pytest.mark.parametrize(
    ("baseline_ms", "treatment_ms", "expected"),
    [
        (2.0, 1.0, 2.0),  # treatment twice as fast
        (1.0, 2.0, 0.5),
        (4.0, 1.0, 4.0),  # exactly at the upper clip
        (5.0, 1.0, 4.0),  # clipped to 4
        (100.0, 0.5, 4.0),
        (1.0, 4.0, 0.25),  # exactly at the lower clip
        (1.0, 5.0, 0.25),  # clipped to 1/4
        (3.0, 3.0, 1.0),
    ],
)
def test_both_pass_is_the_clipped_runtime_ratio(baseline_ms: float, treatment_ms: float, expected: float) -> None:
    assert ratio(True, baseline_ms, True, treatment_ms) == expected


def test_rescue_break_joint_failure_and_skipped() -> None:
    assert ratio(False, None, True, 9.0) == 4.0  # rescue, however slow the treatment
    assert ratio(True, 0.001, False, None) == 0.25  # break, however slow the baseline was
    assert ratio(False, None, False, None) == 1.0  # joint failure
    assert ratio(True, 1.0, True, 0.1, skipped=True) == 1.0  # skipped inherits the baseline: neutral
    assert ratio(False, None, True, 1.0, skipped=True) == 1.0
    assert verdict_change(False, True) == "rescue"
    assert verdict_change(True, False) == "break"
    assert verdict_change(True, True) == verdict_change(False, False) == "none"
    assert verdict_change(False, True, skipped=True) == "none"


def test_a_pass_without_runtime_cannot_be_scored() -> None:
    with pytest.raises(ValueError, match="positive runtimes"):
        ratio(True, None, True, 1.0)
    with pytest.raises(ValueError, match="positive runtimes"):
        ratio(True, 1.0, True, 0.0)


@pytest.mark.parametrize(
    ("r", "expected"),
    [
        (1.25, "helped"),  # 5/4 exactly: inclusive
        (5 / 4, "helped"),
        (2.5 / 2.0, "helped"),
        (0.3 / 0.24, "helped"),  # 1.2499999999999998 in binary floating point, 5/4 in decimal
        (1.2499, "neutral"),
        (1.0, "neutral"),
        (0.8001, "neutral"),
        (0.8, "harmed"),  # 4/5 exactly: inclusive
        (4 / 5, "harmed"),
        (0.24 / 0.3, "harmed"),
        (1.0 / 1.25, "harmed"),
        (4.0, "helped"),
        (0.25, "harmed"),
    ],
)
def test_outcome_boundaries_are_inclusive(r: float, expected: str) -> None:
    assert outcome(r) == expected


def test_outcome_of_runtime_pairs_on_the_boundaries() -> None:
    assert outcome(ratio(True, 2.5, True, 2.0)) == "helped"  # r = 5/4
    assert outcome(ratio(True, 1.0, True, 1.25)) == "harmed"  # r = 4/5
    assert outcome(ratio(True, 1.0, True, 1.2)) == "neutral"  # r = 0.8333


@pytest.mark.parametrize(
    ("passed", "speedup", "expected"),
    [
        (False, 50.0, 0),  # failed: tier 0 whatever the speed
        (True, None, 1),
        (True, 0.1, 1),
        (True, 0.4999, 1),
        (True, 0.5, 2),  # each threshold counts once reached
        (True, 0.9999, 2),
        (True, 1.0, 3),
        (True, 1.9999, 3),
        (True, 2.0, 4),
        (True, 3.9999, 4),
        (True, 4.0, 5),
        (True, 100.0, 5),
    ],
)
def test_tiers_at_the_thresholds(passed: bool, speedup: float | None, expected: int) -> None:
    assert tier(passed, speedup) == expected


def test_standing_compares_source_tier_with_the_target_solo() -> None:
    assert standing(3, 2) == "above"
    assert standing(2, 2) == "same"
    assert standing(0, 0) == "same"
    assert standing(0, 1) == "below"


def test_inline_cuda_is_not_a_scored_pass() -> None:
    assert scored_pass(True, False) is True
    assert scored_pass(True, True) is False
    assert scored_pass(False, False) is False


def test_directions() -> None:
    assert direction_of_arm("cutedsl2tirx_skill") == "cutedsl2tirx"
    assert direction_of_arm("tirx2cutedsl_skill") == "tirx2cutedsl"
    assert direction_of_arm("solo_tirx") is None
    assert direction_of_arm("tirx2triton_skill") is None
    assert reverse_direction("cutedsl2tirx") == "tirx2cutedsl"


runtimes = st.floats(min_value=1e-3, max_value=1e4, allow_nan=False)
verdicts = st.booleans()


@given(b_pass=verdicts, b_ms=runtimes, t_pass=verdicts, t_ms=runtimes)
def test_swapping_baseline_and_treatment_inverts_r(b_pass: bool, b_ms: float, t_pass: bool, t_ms: float) -> None:
    forward = ratio(b_pass, b_ms, t_pass, t_ms)
    backward = ratio(t_pass, t_ms, b_pass, b_ms)
    assert forward * backward == pytest.approx(1.0, rel=1e-12)
    assert 0.25 <= forward <= 4.0
    flipped = {"helped": "harmed", "harmed": "helped", "neutral": "neutral"}
    if not math.isclose(forward, 1.25, rel_tol=1e-6) and not math.isclose(forward, 0.8, rel_tol=1e-6):
        assert outcome(backward) == flipped[outcome(forward)]
    assert {verdict_change(b_pass, t_pass), verdict_change(t_pass, b_pass)} in ({"none"}, {"rescue", "break"})


@given(passed=verdicts, ms=runtimes)
def test_identical_attempts_are_neutral(passed: bool, ms: float) -> None:
    r = ratio(passed, ms, passed, ms)
    assert r == 1.0 and outcome(r) == "neutral" and verdict_change(passed, passed) == "none"
