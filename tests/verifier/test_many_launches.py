"""Honest kernels of many cheap launches pass every timing rule with a margin (the rules' allowances per launch
and per call), and the gate's own time on an evidence call is not counted as the call's work in its block's total
(``_phases._unwatched``; the cuda false positives of 2026-12-02 and the cpu ones of the red team's rt12 F1,
verifier README "Block totals")."""

from __future__ import annotations

from pathlib import Path

import pytest

from mkbsim.verifier import VerifierSession, _blocks
from mkbsim.verifier._blocks import BlockCall
from mkbsim.verifier._phases import _unwatched
from mkbsim.verifier._trusted import Trusted

CASE = Path(__file__).with_name("honest") / "many_small_launches.py"


def _call(kind: str, ms: float, gate_ms: float = 0.0) -> BlockCall:
    call = BlockCall(kind, 0, [], 0)
    call.trusted = Trusted(round_trip_ms=ms, cpu_ms=ms, idle_cpu_ms=0.0)
    call.page = {"work": {"ms": gate_ms, "bytes": 1, "shares": [1.0], "after_ms": 0.0} if kind == "evidence" else None}
    return call


def _counted(call: BlockCall) -> Trusted:
    """The call's trusted measure as it was, the gate's time in it."""
    assert call.trusted is not None
    return call.trusted


def test_a_block_total_leaves_out_the_gates_time_on_evidence_calls() -> None:
    """A block of six honest 0.6 ms calls on the H200's pattern (2026-12-02): the gate's work on an evidence call
    ~5 ms, varying by milliseconds (the copies of a 600 MB paged cache; the worst block there was 3.4 ms over).
    Counted as the call's, one evidence call whose gate took 2.5 ms over the median fails the block; taken off, the
    calls' own costs pass."""
    even = [_call("timed", 0.6) for _ in range(40)] + [_call("null", 0.3) for _ in range(20)]
    evidence = [_call("evidence", 0.7 + gate, gate) for gate in (4.5, 5.0, 5.0, 5.5, 5.0)]
    block = [_call("timed", 0.6) for _ in range(4)] + [_call("null", 0.3), _call("evidence", 0.7 + 7.5, 7.5)]
    blocks = [even, evidence, block]
    counted = [[(c.kind, _counted(c)) for c in calls] for calls in blocks]
    found, reason = _blocks.total_check(counted, "cuda")
    assert reason is not None and "timing block 3" in reason, found
    found, reason = _blocks.total_check([[(c.kind, _unwatched(c)) for c in calls] for calls in blocks], "cuda")
    assert reason is None, found
    assert _unwatched(block[-1]).round_trip_ms == pytest.approx(0.7)
    assert _unwatched(block[0]) is block[0].trusted


def test_a_cpu_block_total_leaves_out_the_gates_time_but_not_a_thread_s_work_beside_it() -> None:
    """The red team's rt12 F1 (p26 at PRODUCTION on cpu, an honest one-kernel step; figures of a run here): the
    harness copies the 32 MB block tables aside after every call (null calls ~3.3 ms of CPU, timed ~3.6), and the
    gate copies and compares them around an evidence call's launch (~50 ms, one call 108 ms over the median). Counted
    as the calls' own, that block fails; less the gate's time (the CPU of the thread running its steps) it passes.
    A look-ahead a thread of the submission's runs while the gate copies (the same 40 ms in the call's CPU, not in
    the gate thread's) is still the call's: the block fails."""
    quiet = [_call("timed", 3.6) for _ in range(10)] + [_call("null", 3.3 + 0.02 * (i % 3)) for i in range(6)]
    gates = (47.0, 50.0, 52.0, 49.0, 51.0, 50.5, 48.5, 50.0, 51.5)
    evidence = [_call("evidence", 3.9 + gate, gate) for gate in gates]
    jittered = [_call("timed", 3.6) for _ in range(12)] + [_call("null", 3.32)] * 2
    jittered += [_call("evidence", 3.9 + 158.0, 158.0), _call("evidence", 3.9 + 50.0, 50.0)]
    lookahead = [*jittered[:-1], _call("evidence", 3.9 + 50.0 + 40.0, 50.0)]
    counted = [[(c.kind, _counted(c)) for c in calls] for calls in (quiet + evidence, jittered)]
    found, reason = _blocks.total_check(counted, "cpu")
    assert reason is not None and "timing block 2" in reason, found
    blocks = (quiet + evidence, jittered)
    found, reason = _blocks.total_check([[(c.kind, _unwatched(c)) for c in calls] for calls in blocks], "cpu")
    assert reason is None, found
    blocks = (quiet + evidence, lookahead)
    found, reason = _blocks.total_check([[(c.kind, _unwatched(c)) for c in calls] for calls in blocks], "cpu")
    assert reason is not None and "timing block 2" in reason, found
    assert _unwatched(lookahead[-1]).cpu_ms == pytest.approx(3.9 + 40.0)


def test_sixteen_cheap_launches_a_call_pass_every_timing_rule(cpu_session: VerifierSession) -> None:
    report = cpu_session.verify(CASE, "p36", "tirx")
    assert report.passed, report.feedback
    d = report.details
    assert set(d["timing"]["launches_per_call"]) == {16}
    scored, totals, idle = d["scored_time"], d["block_totals"], d["idle_cpu"]
    margins = {
        "scored_time (scored / floor)": scored["scored_ms"] / scored["floor_ms"] if scored["floor_ms"] > 0 else None,
        "block total (worst ratio)": max(totals["ratios"]),
        "idle CPU (median / limit)": idle["median_ms"] / idle["limit_ms"],
        "DSL time (ratio / required)": d["dsl_time"]["ratio"] / d["dsl_time"]["required_ratio"],
    }
    print("\nmany_small_launches margins:", margins, "scored_time:", scored)  # the report quotes these
    assert scored["scored_ms"] >= scored["floor_ms"]
    assert max(totals["ratios"]) <= 1.0
