"""The twin and the stale draw (verifier README, "The twin draw"): after the timing, a correctness draw on each of
three evidence calls' inputs (chosen before the timing) compares its launches' tensor arguments with that call's, and
one on inputs of its own gives its launches the first one's bytes where nothing in the draw wrote. The adversarial cases each rule alone rejects are in
adversarial/ (``timed_answer_keyed_by_position_behind_a_switch_p36``, ``timed_answer_in_a_workspace_the_draws_leave_
fresh_p36``); here, what an honest kernel's twin draw measures, and that without the phase those cases pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from mkbsim.verifier import VerifierSession
from mkbsim.verifier._control import TWIN_CALLS
from tests.kits.twin_draw import one_draw_after_timing, twin_draw_off

ADVERSARIAL = Path(__file__).with_name("adversarial")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "submissions" / "p36_rmsnorm_tirx.py"


def test_an_honest_kernel_s_twin_draw_gives_its_launches_the_same_bytes(cpu_session: VerifierSession) -> None:
    report = cpu_session.verify(EXAMPLE, "p36", "tirx")
    assert report.passed, report.feedback
    twin = report.details["twin_draw"]
    assert twin["twin_calls"] == TWIN_CALLS and {"twin", "twin 2", "twin 3"} <= set(twin)
    assert twin["launches_compared"] == twin["launches_kept"] >= TWIN_CALLS
    assert twin["bytes_compared"] > 0 and twin["bytes_differing"] == 0 and twin["first_differing"] is None
    assert twin["launches_missed"] == twin["launches_unmatched"] == 0
    assert all(o["ok"] for o in twin["twin"]["outputs"]) and all(o["ok"] for o in twin["stale"]["outputs"])
    assert twin["stale"]["bytes_given"] > 0  # (the example's output is fresh memory: given the timed call's bytes)


@pytest.mark.parametrize(
    "case",
    [
        "timed_answer_keyed_by_position_behind_a_switch_p36.py",
        pytest.param("timed_answer_in_a_workspace_the_draws_leave_fresh_p36.py", marks=pytest.mark.thorough),
    ],
)
def test_without_the_twin_draw_a_timed_call_decode_passes(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """The ablation: the phase taken out, each case passes as a full plan (the other rules do not see it)."""
    twin_draw_off(monkeypatch)
    report = cpu_session.verify(ADVERSARIAL / case, "p36", "tirx")
    assert report.passed and report.plan == "full", report.feedback


@pytest.mark.parametrize(
    ("case", "kept", "failure"),
    [
        # a switch the draws leave fresh: the stale draw alone gives the kernel the timed call's (cuda's only defence)
        ("timed_answer_in_a_workspace_the_draws_leave_fresh_p36.py", "stale", "wrong_output"),
        # the cpu's fill: the twin draw alone compares the workspace the timed call wrote
        ("timed_answer_in_a_workspace_the_draws_leave_fresh_p36.py", "twin", "decorative_dsl"),
        # the same checked against the inputs: the stale draw's bytes fail the check, only the twin draw sees it
        ("timed_answer_keyed_to_the_inputs_in_a_workspace_the_draws_leave_fresh_p36.py", "twin", "decorative_dsl"),
    ],
)
def test_each_draw_after_the_timing_alone(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch, case: str, kept: str, failure: str
) -> None:
    one_draw_after_timing(monkeypatch, kept)
    report = cpu_session.verify(ADVERSARIAL / case, "p36", "tirx")
    assert report.failure == failure, report.feedback
