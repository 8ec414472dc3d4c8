"""Whether something slowed the null calls, judged on cpu in the candidate's own worker at the same moment: the CPU
its threads beside the calling one spend during them (``_trusted.beside_check``, ``NULL_OTHERS_MS``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mkbsim.verifier import VerifierSession
from mkbsim.verifier._trusted import NULL_OTHERS_MS
from tests.kits.timing_rules import timing_rules_off

EVIDENCE = Path(__file__).with_name("evidence")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "submissions" / "p36_rmsnorm_tirx.py"


def test_a_thread_burning_cpu_during_the_null_calls_fails_the_calibration(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the calibration alone judges (the burn also lands after the evidence calls, which the scored-time rule sees)
    timing_rules_off(monkeypatch, keep=("calibration",))
    report = cpu_session.verify(EVIDENCE / "null_call_burner_p36.py", "p36", "tirx")
    assert report.failure == "timing_tamper" and "slowed the null calls" in report.feedback, report.feedback
    assert report.details["calibration"]["null_others_ms"] > NULL_OTHERS_MS


@pytest.mark.parametrize("case", [EXAMPLE, EVIDENCE / "pool_launches_overlap.py"], ids=["one_thread", "pool"])
def test_honest_null_calls_spend_no_cpu_beside_the_calling_thread(cpu_session: VerifierSession, case: Path) -> None:
    # the pool's threads wait on their queue during the null calls: idle threads spend no CPU, however loaded the host
    report = cpu_session.verify(case, "p36", "tirx")
    assert report.passed, report.feedback
    assert report.details["calibration"]["null_others_ms"] <= NULL_OTHERS_MS
