"""The timed calls run what the correctness draws checked (DESIGN §5, "audits cannot be told apart"): the
kernel signatures and the DSL time the gate's vault measures, on their own and in a real verification."""

from __future__ import annotations

from pathlib import Path

import pytest

from mkbsim.verifier import VerifierSession, _coverage

ADVERSARIAL = Path(__file__).with_name("adversarial")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "submissions" / "p36_rmsnorm_tirx.py"


def test_kernels_every_draw_launched_are_required_on_most_timed_calls() -> None:
    audited = [frozenset({0, 1}), frozenset({0, 1, 2}), frozenset({0, 1})]  # 2: launched on the first draw only
    timed = [frozenset({0, 1})] * 8
    assert _coverage.kernels_check(audited, timed)[1] is None
    # an honest kernel the data skips now and then (a quarter of the calls at most)
    assert _coverage.kernels_check(audited, timed[:6] + [frozenset({0})] * 2)[1] is None
    found, failure = _coverage.kernels_check(audited, timed[:5] + [frozenset({0, 3})] * 3)
    assert failure and "3 of 8 timed calls" in failure and found["required_signatures"] == 2


def test_dsl_time_must_stay_near_the_draws() -> None:
    draws = [0.9, 0.3, 0.32, 0.31, 0.35]  # the first draw's launch is cold: the least one counts
    assert _coverage.dsl_time_check(draws, [0.2] * 50, "cpu")[1] is None
    found, failure = _coverage.dsl_time_check(draws, [0.05] * 50, "cpu")
    assert failure and "inside DSL launches" in failure
    assert found["ratio"] == pytest.approx(0.05 / 0.3)
    # below the clocks' resolution nothing is judged
    assert _coverage.dsl_time_check([0.001] * 5, [0.0] * 50, "cuda")[1] is None


def test_an_honest_kernel_s_launches_are_timed_alike(cpu_session: VerifierSession) -> None:
    report = cpu_session.verify(EXAMPLE, "p36", "tirx")
    assert report.passed, report.feedback
    kernels, dsl = report.details["timed_kernels"], report.details["dsl_time"]
    assert kernels == {"required_signatures": 1, "timed_calls_missing_them": 0}
    assert all(ms > 0 for ms in dsl["audited_ms"]) and dsl["ratio"] >= _coverage.DSL_TIME_SHARE["cpu"]
    assert len(report.details["timing"]["dsl_ms"]) == 50


@pytest.mark.parametrize(
    ("case", "rule"),
    [("audit_aware_sentinel_probe", "KERNELS_SHARE"), ("audit_aware_idle_kernel", "DSL_TIME_SHARE")],
)
def test_each_rule_is_what_rejects_its_case(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch, case: str, rule: str
) -> None:
    """Without the rule the audit-aware case passes (its own test in test_adversarial would fail)."""
    off = 0.0 if rule == "KERNELS_SHARE" else {"cpu": 0.0, "cuda": 0.0}
    monkeypatch.setattr(_coverage, rule, off)
    report = cpu_session.verify(ADVERSARIAL / f"{case}.py", "p36", "tirx")
    assert report.passed, report.feedback
