"""A verdict resting on a timing measurement is confirmed by a second, independent timing round before it is
issued (DESIGN §5; verifier README, "Timing verdicts are confirmed"); deterministic rules are not retried."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mkbsim.verifier import VerifierSession, _phases
from mkbsim.verifier._judge import Failure
from tests.kits.timing_rules import timing_rules_off

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "submissions" / "p36_rmsnorm_tirx.py"


def _idle_check_failing(rounds: int) -> Callable[..., str | None]:
    """The between-calls rule, made to fire in the first ``rounds`` rounds (it runs once a round)."""
    fired: list[int] = []

    def idle_check(*args: object) -> str | None:
        fired.append(1)
        return "a test's idle rule fired" if len(fired) <= rounds else None

    return idle_check


def test_a_timing_rule_failing_in_the_first_round_only_is_not_the_verdict(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    timing_rules_off(monkeypatch)
    monkeypatch.setattr(_phases, "idle_check", _idle_check_failing(rounds=1))
    report = cpu_session.verify(EXAMPLE, "p36", "tirx")
    assert report.passed and report.bypass_ok, report.feedback
    first, second = report.details["timing_rounds"]
    assert (first["failure"], second["failure"]) == ("background_work", None)
    assert "a test's idle rule fired" in first["feedback"]
    # the round that counts is the second, measured whole: its scored calls are the verdict's median
    assert report.runtime_ms == second["median_ms"] == report.details["timing"]["median_ms"]
    assert len(report.details["timing"]["timed_ms"]) == 50


def test_a_timing_rule_failing_in_both_rounds_is_the_verdict(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    timing_rules_off(monkeypatch)
    monkeypatch.setattr(_phases, "idle_check", _idle_check_failing(rounds=2))
    report = cpu_session.verify(EXAMPLE, "p36", "tirx")
    assert report.failure == "background_work" and "a test's idle rule fired" in report.feedback
    assert [r["failure"] for r in report.details["timing_rounds"]] == ["background_work", "background_work"]
    assert report.runtime_ms is None and report.speedup is None


def test_a_deterministic_rule_is_not_retried(cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch) -> None:
    timing_rules_off(monkeypatch)
    monkeypatch.setattr(_phases, "scored_launches", lambda *args: Failure("decorative_dsl", "a test's launch count"))
    report = cpu_session.verify(EXAMPLE, "p36", "tirx")
    assert (report.failure, report.feedback, report.bypass_ok) == ("decorative_dsl", "a test's launch count", False)
    assert [r["failure"] for r in report.details["timing_rounds"]] == ["decorative_dsl"]


def test_the_rules_that_compare_times_are_the_ones_retried() -> None:
    from mkbsim.verifier._judge import scored_time
    from mkbsim.verifier._trusted import Trusted, cross_check

    slow_watched = scored_time([0.2] * 50, [2.0] * 10, 2, [0.1] * 25)
    assert slow_watched is not None and slow_watched.measured
    # a time reported above the verifier's round trip around it: no load does that
    impossible = cross_check([2.0], [Trusted(1.0, 1.0, 0.0)], [0.01], [Trusted(1.0, 1.0, 0.0)], "cpu")
    assert impossible["tampered"] and impossible["impossible"] == 1
