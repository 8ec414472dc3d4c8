"""The timed calls run what the correctness draws checked (DESIGN §5, "audits cannot be told apart"): the
kernel signatures, the DSL time and the work (bytes the launches change, outputs holding what they wrote) the
gate's vault measures on the evidence calls, the scored calls' launch count and time against the evidence
calls', on their own and in a real verification."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from mkbsim.catalog import load_catalog
from mkbsim.verifier import VerifierSession, _coverage, _judge, _phases, _provenance, resolve_protocol
from mkbsim.verifier._verification import Shape
from tests.kits.timing_rules import timing_rules_off
from tests.kits.twin_draw import twin_draw_off

ADVERSARIAL = Path(__file__).with_name("adversarial")
EVIDENCE = Path(__file__).with_name("evidence")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "submissions" / "p36_rmsnorm_tirx.py"


def test_kernels_every_draw_launched_are_required_on_most_timed_calls() -> None:
    audited = [frozenset({0, 1}), frozenset({0, 1, 2}), frozenset({0, 1})]  # 2: launched on the first draw only
    timed = [frozenset({0, 1})] * 8
    assert _coverage.kernels_check(audited, timed)[1] is None
    # an honest kernel the data skips now and then (a quarter of the calls at most)
    assert _coverage.kernels_check(audited, timed[:6] + [frozenset({0})] * 2)[1] is None
    found, failure = _coverage.kernels_check(audited, timed[:5] + [frozenset({0, 3})] * 3)
    assert failure and "3 of 8 timed calls" in failure and found["shared_by_all_draws"] == 2


def test_draws_made_to_disagree_leave_every_kernel_required() -> None:
    """Each draw launches its kernel with a scratch argument of another shape, so no signature is shared by
    all draws; the timed calls' token launch (the same kernel on one row) matches no draw's launches."""
    audited = [frozenset({k}) for k in range(5)]
    found, failure = _coverage.kernels_check(audited, [frozenset({9})] * 10)
    assert failure and "10 of 10 timed calls" in failure
    assert found == {"draw_signatures": [1] * 5, "shared_by_all_draws": 0, "timed_calls_missing_them": 10}
    # a call repeating any one draw's complete launches is what that draw checked
    assert _coverage.kernels_check(audited, [frozenset({3, 9})] * 10)[1] is None


def test_dsl_time_must_stay_near_the_draws() -> None:
    draws = [0.9, 0.3, 0.32, 0.31, 0.35]  # the first draw's launch is cold: the least one counts
    assert _coverage.dsl_time_check(draws, [0.2] * 50, "cpu")[1] is None
    found, failure = _coverage.dsl_time_check(draws, [0.05] * 50, "cpu")
    assert failure and "inside DSL launches" in failure
    assert found["ratio"] == pytest.approx(0.05 / 0.3)
    # a launch of the same kernel doing no work, in blocks: its fixed cost on cpu (12.6 µs against a 78 µs draw)
    found, failure = _coverage.dsl_time_check([0.127, 0.116, 0.078, 0.08, 0.082], [0.0126] * 10, "cpu")
    assert failure and found["ratio"] == pytest.approx(0.1615, abs=1e-3)
    # the idle kernel's highest ratio on cpu in blocks (0.23), the least honest ones: 0.48 on cpu under load
    # (blocks: warm evidence calls), 0.92 on the H200
    assert _coverage.dsl_time_check([0.1] * 5, [0.023] * 10, "cpu")[1]
    assert _coverage.dsl_time_check([0.1] * 5, [0.048] * 10, "cpu")[1] is None
    assert _coverage.dsl_time_check([0.1] * 5, [0.092] * 10, "cuda")[1] is None
    assert _coverage.dsl_time_check([0.1] * 5, [0.047] * 10, "cuda")[1] is None  # p36 CuTe DSL via TVM FFI, H200
    assert _coverage.dsl_time_check([0.1] * 5, [0.03] * 10, "cuda")[1]
    # below the clocks' resolution nothing is judged
    assert _coverage.dsl_time_check([0.001] * 5, [0.0] * 50, "cuda")[1] is None


def test_a_long_launch_s_time_must_stay_nearer_the_draws() -> None:
    """Red team rt36 F1: a slow kernel whose timed calls run a third of its work beside an eager answer (p32's MLP at
    SMOKE: 36 of the draws' 108 ms, 0.33 of them). The draws' long part (each launch's time beyond its fixed cost) is
    held to ``DSL_TIME_LONG_SHARE`` on cpu; honest long launches measured 0.96-1.01 (p63, p43, p52, p21 at SMOKE).
    Short launches have no long part and keep the flat share; cuda has no long share yet."""
    draws, long = [108.5, 108.0, 108.3, 112.6, 109.9], [108.4, 107.9, 108.2, 112.5, 109.8]
    found, failure = _coverage.dsl_time_check(draws, [37.0] * 20, "cpu", long)
    assert failure and "beyond a launch's fixed cost" in failure
    assert found["required_ms"] == pytest.approx(_coverage.DSL_TIME_LONG_SHARE["cpu"] * 107.9)
    assert _coverage.dsl_time_check(draws, [37.0] * 20, "cpu")[1] is None  # the flat share alone: passed
    assert _coverage.dsl_time_check(draws, [104.0] * 20, "cpu", long)[1] is None  # honest: 0.96
    assert _coverage.dsl_time_check(draws, [37.0] * 20, "cuda", long)[1] is None
    # ticks: launches of the fixed cost each add to the draws' time, never to their long part
    assert _coverage.dsl_time_check([2.0] * 5, [0.7] * 20, "cpu", [0.0] * 5)[1] is None
    # under the suite's load with a red team beside it, honest p36's one launch: 0.063 ms on every draw, 0.025 timed;
    # a long part that short is not judged (the flat share holds: 0.021 required)
    fixed = _provenance.LAUNCH_FIXED_MS["cpu"]
    loaded = [0.0627, 0.071, 0.066, 0.069, 0.064]
    assert _coverage.dsl_time_check(loaded, [0.0252] * 50, "cpu", [ms - 0.02 for ms in loaded])[1] is None
    assert _coverage.dsl_time_check(loaded, [0.0252] * 50, "cpu", [ms - fixed for ms in loaded])[1] is None
    assert _coverage.dsl_time_check(loaded, [0.019] * 50, "cpu", [ms - fixed for ms in loaded])[1]  # under a third


def _work(changed: int, *shares: float) -> dict[str, object]:
    return {"bytes": changed, "ms": 0.01, "shares": list(shares)}


def test_the_launches_of_the_timed_calls_must_do_the_draws_work() -> None:
    draws = [_work(16384, 1.0)] * 5  # p36 at SMOKE: every byte of the output written, every element left
    # honest: reused memory already holding some of the values a kernel writes again (an integer output)
    assert _coverage.work_check(draws, [_work(12000, 0.7)] * 10)[1] is None
    for timed, what in (
        ([_work(0, 0.0)] * 10, "changed 0 bytes"),  # no rows: the eager answer written before the launch
        ([_work(256, 1 / 64)] * 10, "changed 256 bytes"),  # one row of 64
        ([_work(16384, 0.0)] * 10, "left 0.0% of output 0"),  # a scratch output, or the result overwritten
        ([None] * 10, "changed 0 bytes"),  # no record: the call never returned its outputs
    ):
        found, failure = _coverage.work_check(draws, timed)
        assert failure and what in failure, failure
    # the median call: one odd call of an honest kernel does not fail it
    assert _coverage.work_check(draws, [_work(0, 0.0)] + [_work(16384, 1.0)] * 9)[1] is None
    # an output the draws' launches leave few of is read at too few samples: only the bytes are judged
    cache = [_work(4096, 1.0, 0.03)] * 5
    assert _coverage.work_check(cache, [_work(4096, 1.0, 0.0)] * 10)[1] is None
    found, failure = _coverage.work_check(cache, [_work(1024, 1.0, 0.03)] * 10)
    assert failure and found["ratios"][0] == pytest.approx(0.25)


def test_a_floating_output_s_share_stays_near_the_draws() -> None:
    """Red team rt14 F1: the DSL doing 58% of the rows on the draws and 31% on the timed calls, eager code the rest,
    is over half the draws' share; of a floating output (no value the memory held already, zeros aside) the share may
    fall short of the draws' by ``FLOAT_SHARE_MARGIN`` only. An integer output keeps the half."""
    draws, timed = [_work(9500, 0.58)] * 5, [_work(5000, 0.31)] * 10
    assert _coverage.work_check(draws, timed, [False])[1] is None
    found, failure = _coverage.work_check(draws, timed, [True])
    assert failure and "left 31.0% of output 0" in failure and found["required"][1] == pytest.approx(0.43)
    assert _coverage.work_check(draws, [_work(9000, 0.45)] * 10, [True])[1] is None  # within the margin
    assert _coverage.work_check([_work(16384, 1.0)] * 5, [_work(16384, 0.86)] * 10, [True])[1] is None


def test_what_a_floating_output_falls_short_within_the_margin_is_measured_for_the_plan() -> None:
    """The shortfall the plan prices (``_plankind.with_timed_shortfall``): of a floating output's launch-left share,
    and of its carried share where the draws' is clear (``CARRIED_PRICED_FROM``); an integer output's is not."""
    draws = [_carried(16384, 1.0, 1.0)] * 5
    found, failure = _coverage.work_check(draws, [_carried(14336, 0.875, 0.875)] * 10, [True])
    assert failure is None and found["float_shortfall"] == pytest.approx(0.125)
    assert _coverage.work_check(draws, [_carried(14336, 0.875, 0.875)] * 10, [False])[0]["float_shortfall"] == 0.0
    # a copied output (no launch-left share): its carried share, clear on the draws, is priced; a noisy one is not
    copied = [_carried(16384, 0.0, 0.95)] * 5
    found = _coverage.work_check(copied, [_carried(16384, 0.0, 0.85)] * 10, [True])[0]
    assert found["float_shortfall"] == pytest.approx(0.10)
    noisy = [_carried(16384, 0.0, 0.56)] * 5  # an honest p51 eager combine's: 0.47-0.56 on the draws
    assert _coverage.work_check(noisy, [_carried(16384, 0.0, 0.44)] * 10, [True])[0]["float_shortfall"] == 0.0
    # more DSL work on the timed calls than on the draws is no shortfall to price
    assert _coverage.work_check(draws, [_carried(16384, 1.0, 1.0)] * 10, [True])[0]["float_shortfall"] <= 0.0


def test_an_output_the_draws_coverage_does_not_credit_is_not_judged() -> None:
    """The draws' coverage took output 1 from the DSL (a launch casting an eager answer for it: red team rt45's p54
    kernel); the decode rule takes it from the evidence calls' work too, so its launch-left share there is no measure
    of the DSL work the draws checked."""
    draws = [_work(16384, 1.0, 1.0)] * 5
    timed = [_work(16384, 1.0, 0.001)] * 10
    assert _coverage.work_check(draws, timed, [True, True])[1]
    found, failure = _coverage.work_check(draws, timed, [True, True], [True, False])
    assert failure is None and found["judged"] == [0, 1] and found["float_shortfall"] == 0.0
    # an output the coverage credits stays judged, and an unknown one (no coverage entry) too
    assert _coverage.work_check(draws, timed, [True, True], [False, True])[1]
    assert _coverage.work_check(draws, timed, [True, True], [True])[1]


def _carried(changed: int, share: float, carried: float) -> dict[str, object]:
    return {"bytes": changed, "ms": 0.01, "shares": [share], "carried": [carried]}


def test_an_output_the_draws_returned_as_an_eager_copy_keeps_its_share_judged() -> None:
    """Red team rt22 F2: the draws return ``out.clone()`` of what their kernel computed (no element is what a launch
    left in the output's memory: a share of 0, under ``WORK_SAMPLED_FLOOR``, never judged), the timed calls an eager
    answer beside a scratch launch of the same kernel (the bytes). The values the draws' launches made are the output's
    (a carried share of 1.0); the timed calls' launches made none of it."""
    draws = [_carried(16384, 0.0, 1.0)] * 5
    found, failure = _coverage.work_check(draws, [_carried(14800, 0.0, 0.003)] * 10, [True])
    assert failure and "made the values of 0.3% of output 0's elements" in failure, failure
    assert found["draws_carried_shares"] == [1.0] and found["required"] == [8192.0, 0.0, 0.85]
    # before the carried share (records without it), the same figures passed
    legacy = [{"bytes": 16384, "ms": 0.01, "shares": [0.0]}] * 5
    assert _coverage.work_check(legacy, [{"bytes": 14800, "ms": 0.01, "shares": [0.0]}] * 10, [True])[1] is None
    # honest: the same copy on every call; a floating output held within the margin, an integer one to a half
    assert _coverage.work_check(draws, [_carried(16384, 0.0, 0.99)] * 10, [True])[1] is None
    assert _coverage.work_check(draws, [_carried(16384, 0.0, 0.8)] * 10, [True])[1]
    assert _coverage.work_check(draws, [_carried(16384, 0.0, 0.8)] * 10, [False])[1] is None
    # an output eager code derives from the launches' values (split-K partials summed): the carried share is noise
    # under ``WORK_CARRIED_FLOOR`` on the draws, and only the bytes are judged, as before
    partials = [_carried(65536, 0.0, 0.08)] * 5
    assert _coverage.work_check(partials, [_carried(60000, 0.0, 0.0)] * 10, [True])[1] is None
    assert _coverage.work_check(partials, [_carried(20000, 0.0, 0.0)] * 10, [True])[1]


def test_both_shares_are_judged_where_the_draws_reach_their_floors() -> None:
    """The draws' kernel writes a tenth of the output's rows into it and the rest into a workspace eager code copies
    out; the timed calls' kernel writes half as many rows and nothing else of the answer: the launch-left share holds
    (0.05 against 0.1, within the margin), the carried one does not."""
    draws = [_carried(16384, 0.1, 1.0)] * 5
    failure = _coverage.work_check(draws, [_carried(16384, 0.05, 0.05)] * 10, [True])[1]
    assert failure and "output 0's elements (wherever" in failure and "left 5.0%" not in failure, failure
    assert _coverage.work_check(draws, [_carried(16384, 0.1, 1.0)] * 10, [True])[1] is None


def _copied(*shares: float) -> dict[str, object]:
    return {"bytes": 16384, "ms": 0.01, "shares": [1.0] * len(shares), "copied": list(shares)}


def test_the_launches_of_the_timed_calls_must_not_copy_more_than_the_draws() -> None:
    """rt13 F1: the same launch copying an eager answer into the output changes every byte and leaves every element
    (the work rule passes it); where its written values came from does not."""
    draws = [_copied(0.0)] * 5
    assert _coverage.copied_check(draws, [_copied(0.0)] * 8 + [_copied(1.0)] * 2)[1] is None  # two odd calls
    assert _coverage.copied_check(draws, [_copied(0.2)] * 10)[1] is None  # within the margin
    found, failure = _coverage.copied_check(draws, [_copied(1.0)] * 8 + [_copied(0.0)] * 2)
    assert failure and "output 0: on evidence calls 1, 2, 3, 4, 5, 6, 7, 8 of 10 (median 100.0%" in failure
    assert found["draws_copied"] == [0.0] and found["timed_copied"] == [1.0]
    # a copy on some calls only (an answer computed ahead by an earlier call, rt12 F0): the median stays at 0
    found, failure = _coverage.copied_check(draws, [_copied(0.0), _copied(1.0)] * 2 + [_copied(0.0)] * 6)
    assert failure is None and found["calls_over"] == [[2, 4]]
    found, failure = _coverage.copied_check(draws, [_copied(0.0), _copied(1.0)] * 5)
    assert failure and found["timed_copied"] == [0.5] and "calls 2, 4, 6, 8, 10 of 10" in failure
    # an honest kernel that copies (a cache append of the inputs' rows) copies as much on its draws
    assert _coverage.copied_check([_copied(0.1, 0.9)] * 5, [_copied(0.1, 0.95)] * 10)[1] is None
    found, failure = _coverage.copied_check([_copied(0.1, 0.0)] * 5, [_copied(0.1, 0.5)] * 10)
    assert failure and "output 1: on evidence calls" in failure and "(median 50.0%" in failure
    assert "output 0" not in failure
    assert _coverage.copied_check(draws, [None] * 10)[1] is None  # no record: the work rule judges it


def test_an_honest_kernel_s_launches_are_timed_alike(cpu_session: VerifierSession) -> None:
    report = cpu_session.verify(EXAMPLE, "p36", "tirx")
    assert report.passed, report.feedback
    kernels, dsl = report.details["timed_kernels"], report.details["dsl_time"]
    assert kernels == {"draw_signatures": [1] * 5, "shared_by_all_draws": 1, "timed_calls_missing_them": 0}
    assert all(ms > 0 for ms in dsl["audited_ms"]) and dsl["ratio"] >= _coverage.DSL_TIME_SHARE["cpu"]
    fixed = _provenance.LAUNCH_FIXED_MS["cpu"]  # one launch a draw: its long part is its time beyond the fixed cost
    assert dsl["audited_long_ms"] == pytest.approx([max(ms - fixed, 0.0) for ms in dsl["audited_ms"]], abs=1e-9)
    work = report.details["timed_work"]  # every byte of the output written on the draws and the evidence calls
    assert work["draws_output_shares"] == [1.0] and min(work["ratios"][k] for k in work["judged"]) >= 0.8
    shape = report.details["shape"]  # a bf16 output: 2 bytes an element, nearly every one changed
    assert work["draws_bytes"] >= 0.9 * 2 * shape["batch_size"] * shape["hidden_size"]
    evidence = report.details["evidence_calls"]
    assert len(evidence["dsl_ms"]) == _phases.EVIDENCE_CALLS and evidence["launches"] == [1] * _phases.EVIDENCE_CALLS
    assert len(report.details["timing"]["timed_ms"]) == 50


def test_scored_calls_launch_as_many_kernels_as_the_evidence_calls() -> None:
    assert _judge.scored_launches([2] * 50, [2] * 10) is None
    assert _judge.scored_launches([3, 2, 2, 3, 3], [2, 3, 3]) is None  # a count the data varies
    failure = _judge.scored_launches([1] * 50, [2] * 10)
    assert failure and failure.code == "decorative_dsl" and "fewer than every call" in failure.feedback


def test_scored_calls_launch_over_as_many_bytes_as_the_evidence_calls() -> None:
    """The launch footprint (``_judge.scored_footprint``): the same plan spans the same bytes; launches sized by the
    data vary a little; a token launch over one row of the output does not reach it, even where a guess missed two
    of the evidence calls (they spanned the token launch's bytes too: the red team's detector missed 2 of 10)."""
    assert _judge.scored_footprint([66560] * 50, [66560] * 10) is None
    assert _judge.scored_footprint([900, 1100, 1000] * 10, [1100, 950, 1000, 1050]) is None  # ragged
    missed = [66560] * 8 + [34052] * 2
    failure = _judge.scored_footprint([34052] * 50, missed)
    assert failure and failure.code == "decorative_dsl" and "spanned 34052 bytes" in failure.feedback


def test_scored_calls_spend_about_as_long_inside_their_launches_as_the_evidence_calls() -> None:
    """cpu (``_judge.scored_dsl_time``): the launches' own time, which the vault's work on a watched call is outside
    of; medians, a share of the watched calls' less a slack a launch."""
    watched, one = [0.4 + 0.02 * (i % 3) for i in range(10)], [1] * 10
    assert _judge.scored_dsl_time([0.42] * 50, watched, [1] * 50, one) is None
    assert _judge.scored_dsl_time([0.3] * 50, watched, [1] * 50, one) is None  # 0.71 of the watched median: slack
    failure = _judge.scored_dsl_time([0.12] * 50, watched, [1] * 50, one)  # 0.29: work left out of the launches
    assert failure is not None and failure.code == "decorative_dsl" and failure.measured
    assert "inside DSL launches" in failure.feedback and "not watched" in failure.feedback


def test_a_launch_s_slack_is_its_cold_start_and_no_more() -> None:
    """A watched launch starts cold; an honest call of 16 launches of ~7 µs measured 0.41-0.47 of its watched
    median, which the slack covers; 16 launches of a larger kernel buy at most 0.32 ms, not a share of its work."""
    sixteen = [16] * 10
    assert _judge.scored_dsl_time([0.115] * 50, [0.26] * 10, [16] * 50, sixteen) is None
    assert _judge.scored_dsl_time([0.5] * 50, [2.0] * 10, [16] * 50, sixteen) is not None  # a quarter of 2 ms
    assert _judge.scored_dsl_time([1.3] * 50, [2.0] * 10, [16] * 50, sixteen) is None


def test_launches_added_to_buy_slack_cost_more_than_they_free() -> None:
    """Red team rt21 (figures of its runs): an 8 ms kernel run only where watched, with one-float "tick" launches
    (~7 µs watched, ~3 µs scored) added to farm a flat 20 µs a launch. F1: 700 ticks on two watched calls in three
    (evidence median 702 launches), scored calls of 2 launches (a probe and a copy of an eager answer); F3: 400 ticks
    on every call. The slack counts the launches both make, at 1.5 times what a scored launch costs."""
    watched_f1, launches_f1 = [12.59, 8.0, 12.59, 12.59, 8.0] * 2, [702, 2, 702, 702, 2] * 2
    assert _judge.scored_dsl_time([0.0157] * 50, watched_f1, [2] * 50, launches_f1) is not None
    assert _judge.scored_dsl_time([1.11] * 50, [10.65] * 10, [402] * 50, [402] * 10) is not None
    # the same 400 ticks around the kernel on every call, as an honest plan of many launches would
    assert _judge.scored_dsl_time([9.1] * 50, [10.65] * 10, [402] * 50, [402] * 10) is None


def test_the_scored_launch_time_ignores_the_harness_s_share_of_a_call() -> None:
    """The red team's rt12 F2 on cpu (p26 at PRODUCTION, figures of an honest run): the harness copies 32 MB of
    in-place block tables after every call (~4.8 ms of a 5.5 ms call, the kernel ~0.4 ms). The launches' time holds
    none of it: a scored call that skipped its kernel's work fails however large the harness's share."""
    watched = [0.4 + 0.02 * (i % 5 - 2) for i in range(10)]
    assert _judge.scored_dsl_time([0.39] * 50, watched, [1] * 50, [1] * 10) is None
    assert _judge.scored_dsl_time([0.02] * 50, watched, [1] * 50, [1] * 10) is not None


def test_scored_calls_are_no_faster_than_the_evidence_calls_beyond_what_the_evidence_costs() -> None:
    """cuda (``_judge.scored_time``): the reported times, less the vault's measured time, and a launch's round trip."""
    per_launch = _judge.EVIDENCE_LAUNCH_COST_MS
    harness = [0.1] * 25
    # honest: the evidence calls pay the gate's round trip on each of their 2 launches, and are noisier
    assert _judge.scored_time([0.2] * 50, [0.2 + 2 * per_launch] * 10, 2, harness) is None
    assert _judge.scored_time([0.2] * 50, [0.24] * 10, 2, harness) is None
    failure = _judge.scored_time([0.2] * 50, [2.0] * 10, 2, harness)  # 10x: beyond 25% and 2 launches
    assert failure and failure.code == "decorative_dsl" and "when it is watched" in failure.feedback


def test_only_launches_both_kinds_of_call_make_buy_the_allowance() -> None:
    """Red team rt21 F1 on cuda's figures: 700 launches on the watched calls only, 2 on the scored ones; the
    allowance is for the 2 (``_judge.shared_launches``)."""
    assert _judge.shared_launches([2] * 50, [702, 2, 702, 702, 2] * 2) == 2
    assert _judge.shared_launches([34] * 50, [34] * 10) == 34
    assert _judge.scored_time([0.3] * 50, [12.6] * 10, _judge.shared_launches([2] * 50, [702] * 10), [0.1] * 25)


def test_the_share_allowed_is_of_the_calls_own_cost_not_the_harness_s() -> None:
    """cuda, the same case as rt12 F2: a quarter of the whole watched call (6.15 ms) let a scored call that skipped
    all its work (the harness's cost and two idle launches: 4.9 ms) pass; a quarter of the evidence calls' own cost
    does not. The honest calls, and the null calls' noise, still pass: their spread widens the line."""
    nulls = [4.83 + 0.05 * (i % 5 - 2) for i in range(25)]
    watched, honest, skipped = [6.15] * 10, [5.75] * 50, [4.9] * 50
    assert _judge.scored_time(honest, watched, 1, nulls) is None
    failure = _judge.scored_time(skipped, watched, 1, nulls)
    assert failure is not None and failure.code == "decorative_dsl"
    noisy = [4.83 + 0.6 * (i % 5 - 2) for i in range(25)]  # a loaded machine's harness: the same saving is noise
    assert _judge.scored_time(skipped, watched, 1, noisy) is None


def test_a_submission_knowing_the_evidence_calls_is_rejected(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the order of the timing phase fixed (the test's doing: the verifier draws it from the system's
    randomness), the case guesses every evidence call; only the scored calls' time rejects it."""
    keys = iter(range(10**6))
    monkeypatch.setattr(_phases.rng, "random", lambda: next(keys) / 10**6)  # sorting keeps the plan's order
    # the scored-time rule alone (its eager scored calls leave more CPU around the timer than the null calls, so
    # the trusted clock catches it now and then too: a CI run under two workers saw 0.60 ms against 0.22 reported)
    timing_rules_off(monkeypatch, keep=("scored_time",))
    report = cpu_session.verify(EVIDENCE / "known_plan_idle_kernel.py", "p36", "tirx")
    assert report.failure == "decorative_dsl", report.feedback
    assert "inside DSL launches" in report.feedback and "not watched" in report.feedback
    assert [r["failure"] for r in report.details["timing_rounds"]] == ["decorative_dsl", "decorative_dsl"]
    monkeypatch.setattr(_judge, "SCORED_DSL_SHARE", 0.0)  # the rule off: the same case passes
    keys = iter(range(10**6))
    report = cpu_session.verify(EVIDENCE / "known_plan_idle_kernel.py", "p36", "tirx")
    assert report.passed, report.feedback


def test_a_submission_guessing_the_evidence_calls_by_the_gate_s_cost_gains_little(
    cpu_session: VerifierSession,
) -> None:
    """The probe's guess is only as good as the machine is quiet (and the gate's copy of the launch's arguments
    on an evidence call is there to time); whatever it guesses, the scored calls' launches do not spend less time
    than the evidence calls' by more than the rule's share, or it is rejected (on cpu the vault times every call's
    launches: ``_judge.scored_dsl_time``)."""
    report = cpu_session.verify(EVIDENCE / "probe_idle_kernel.py", "p36", "tirx")
    assert report.failure in (None, "decorative_dsl", "timing_tamper"), report.feedback
    if report.passed:
        figures = report.details["scored_time"]  # the DSL-time medians the rule compared, and its line
        assert figures["measure"] == "dsl_ms"
        assert figures["scored_ms"] == report.details["timing_rounds"][-1]["dsl_median_ms"]
        assert figures["scored_ms"] >= figures["floor_ms"]


@pytest.mark.thorough  # an ablation: the adversarial test is what keeps each case rejected
@pytest.mark.parametrize(
    ("case", "rules"),
    [
        # a token launch: another kernel, or the same one on a slice (no signature of a draw's, nor its work)
        ("audit_aware_sentinel_probe", ("KERNELS_SHARE", "WORK_SHARE")),
        ("varied_scratch_per_draw", ("KERNELS_SHARE", "WORK_SHARE")),
        ("audit_aware_idle_kernel", ("DSL_TIME_SHARE", "WORK_SHARE")),  # no rows when not audited
        # the same launch with no rows, one row, a bound of zero read from a tensor: the DSL-time rule passes them
        # at 0.52-0.94 of the draws' time (its 0.40 catches them only now and then, by load), so it is off too
        ("zero_work_no_rows", ("WORK_SHARE", "DSL_TIME_SHARE")),
        ("zero_work_one_row", ("WORK_SHARE", "DSL_TIME_SHARE")),
        ("zero_work_bound_from_data", ("WORK_SHARE", "DSL_TIME_SHARE")),
        # every row of real work, into a scratch buffer or written over by eager code
        ("zero_work_scratch_output", ("WORK_SHARE",)),
        ("zero_work_overwritten", ("WORK_SHARE",)),
        # the draws' kernel result returned through an eager copy (a clone, a concatenation of halves, a transpose
        # copied: no launch-left share to judge), an eager answer and a scratch launch elsewhere (rt22 F2): the carried
        # share
        ("clone_on_draws_scratch_on_timed_p36", ("WORK_SHARE",)),
        ("concatenated_halves_on_draws_scratch_on_timed_p36", ("WORK_SHARE",)),
        ("transposed_copy_on_sentinel_scratch_on_timed_p36", ("WORK_SHARE",)),
        # the same launch copying an answer computed elsewhere: every byte changed, every element left (rt13 F1); a copy
        # is an identity map too, which the evidence calls' decode fit takes from the work since rt22 F1: both rules
        ("timed_copy_eager_answer_p36", ("COPIED_MARGIN", "WORK_SHARE")),
        ("timed_copy_probe_detector_p36", ("COPIED_MARGIN", "WORK_SHARE")),
        ("timed_copy_permuted_p36", ("COPIED_MARGIN", "WORK_SHARE")),
        ("timed_copy_half_p36", ("COPIED_MARGIN", "WORK_SHARE")),
        ("timed_copy_workspace_p36", ("COPIED_MARGIN", "WORK_SHARE")),
        # the draws' own staging copy of a launch-made workspace, a copy through two workspaces, a copy into a buffer
        # larger than the output or transposed, returned as a view (rt14 F2, F3); both rules likewise
        ("timed_copy_staging_baseline_p36", ("COPIED_MARGIN", "WORK_SHARE")),
        ("timed_copy_two_stages_p36", ("COPIED_MARGIN", "WORK_SHARE")),
        ("timed_copy_oversized_buffer_p36", ("COPIED_MARGIN", "WORK_SHARE")),
        ("timed_copy_transposed_view_p36", ("COPIED_MARGIN", "WORK_SHARE")),
        # the same launch on fewer rows of a floating output on the timed calls, two thirds of the draws' (rt14 F1)
        ("timed_share_halved_p36", ("FLOAT_SHARE_MARGIN",)),
        # the same launch undoing a simple map of an answer computed elsewhere: twice it halved in place, a copy within
        # its own buffer, a scratch argument mapped, its bits XORed back, an affine map through two launches (rt22 F1):
        # every byte changed and every element left, until the evidence calls' decode fit took them from the work
        ("evidence_decode_halved_in_place_p36", ("WORK_SHARE",)),
        ("evidence_decode_second_half_copied_p36", ("WORK_SHARE",)),
        ("evidence_decode_scratch_argument_p36", ("WORK_SHARE",)),
        ("evidence_decode_bits_xored_in_place_p36", ("WORK_SHARE",)),
        ("evidence_decode_affine_through_two_launches_p36", ("WORK_SHARE",)),
    ],
)
def test_each_rule_is_what_rejects_its_case(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch, case: str, rules: tuple[str, ...]
) -> None:
    """Without the rules the audit-aware case passes (its own test in test_adversarial would fail). The other
    timing rules are off too: a case that passes only when a loaded machine's noise spares them shows nothing."""
    timing_rules_off(monkeypatch)
    twin_draw_off(monkeypatch)  # (each gives its kernel other bytes on the timed calls)
    # most of them tell their kernel which calls are draws by a number, which the fixed-arguments rule rejects first
    monkeypatch.setattr(_coverage, "fixed_check", lambda changed: ({}, None))
    off = {"KERNELS_SHARE": 0.0, "WORK_SHARE": 0.0, "COPIED_MARGIN": 1.0, "FLOAT_SHARE_MARGIN": 1.0}  # shares <= 1
    for rule in rules + (("FLOAT_SHARE_MARGIN",) if "WORK_SHARE" in rules else ()):  # the work rule's two lines
        monkeypatch.setattr(_coverage, rule, off.get(rule, {"cpu": 0.0, "cuda": 0.0}))
    report = cpu_session.verify(ADVERSARIAL / f"{case}.py", "p36", "tirx")
    assert report.passed, report.feedback


def test_enough_scored_calls_are_rechecked_to_catch_a_quarter_of_them_wrong() -> None:
    n = _phases.rechecked_count(50, 3)
    assert n == 18
    wrong = 13  # a quarter of 50, rounded up
    miss = math.comb(50 - wrong, n) / math.comb(50, n)
    assert miss <= _phases.RECHECK_MISS < math.comb(50 - wrong, n - 1) / math.comb(50, n - 1)
    assert math.comb(50 - wrong, 3) / math.comb(50, 3) > 0.39  # the protocol's 3 missed them 2 times in 5
    assert _phases.rechecked_count(4, 3) == 4  # never more than the calls made


def test_wrong_outputs_on_a_share_of_the_timed_calls_are_caught_after_the_fact(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The case's signatures, DSL time and scored time are the draws'; only the re-check finds its ~20 wrong
    scored calls (missed with probability C(30, 18) / C(50, 18) < 1e-5), and with no call re-checked it passes."""
    case = ADVERSARIAL / "unchecked_share_of_timed_calls.py"
    report = cpu_session.verify(case, "p36", "tirx")
    assert report.failure == "wrong_output" and "(re-checked)" in report.feedback, report.feedback
    monkeypatch.setattr(_phases, "rechecked_count", lambda calls, least: 0)
    # the work rule rejects it too where half the evidence calls are among its no-row calls (a median of 10), and so
    # does the fixed-arguments rule (its row count, 0 there, a tensor of Python's values every draw gave as 16)
    monkeypatch.setattr(_coverage, "WORK_SHARE", 0.0)
    monkeypatch.setattr(_coverage, "FLOAT_SHARE_MARGIN", 1.0)
    monkeypatch.setattr(_coverage, "fixed_check", lambda changed: ({}, None))
    twin_draw_off(monkeypatch)  # (its row count differs on the twin draw too)
    report = cpu_session.verify(case, "p36", "tirx")
    assert report.passed, report.feedback


def test_a_kept_seed_draws_the_same_inputs_again_for_every_problem() -> None:
    """The re-check draws a scored call's inputs again from its seed: every problem's inputs are a function
    of the seed (a problem drawing from global state would make honest re-checks fail)."""
    for problem in load_catalog():
        shape = Shape(problem, "smoke", torch.device("cpu"), 3.0)
        seed = 12345
        first, again = shape.draw(seed), shape.draw(seed)
        for a, b in zip(first, again, strict=True):
            assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b, problem.id


def test_scored_calls_host_work_stays_within_what_the_draws_eager_operators_took() -> None:
    """cpu (``_judge.scored_host_time``): figures of p36 at PRODUCTION on the 2-core VM (2026-12-04). The honest
    example (a partial plan: its eager operators took 32 ms on the draws, colder there) spends 16 ms a scored call on
    host work; red team rt23's F1 (`h2p_input_key_bits_int16`: the draws honest, an eager answer keyed on an input
    elsewhere) spends 41.6 ms beyond a 4.3 ms launch with 0.14 ms of eager operators on its draws."""
    null = [0.2] * 20
    found, failure = _judge.scored_host_time([20.4] * 50, [4.3] * 50, null, [32.0, 31.9, 33.0, 30.2, 32.4], [1] * 50)
    assert failure is None and found is not None and found.own_ms == pytest.approx(15.9)
    found, failure = _judge.scored_host_time([46.1] * 50, [4.3] * 50, null, [0.14] * 5, [1] * 50)
    assert failure is not None and failure.code == "decorative_dsl" and failure.measured
    assert found is not None and found.own_ms > 3 * found.allowed_ms


def test_small_calls_host_work_is_left_to_the_floor() -> None:
    """At SMOKE an eager answer costs less than the harness's and the gate's noise: honest calls 0.21-0.36 ms of host
    work, the rt23 hacks 0.39-0.41 (2026-12-04); the floor passes both, and a launch adds its gate's cost."""
    null = [0.05] * 20
    for own in (0.21, 0.36, 0.41):
        assert _judge.scored_host_time([0.05 + own + 0.04] * 50, [0.04] * 50, null, [0.15] * 5, [2] * 50)[1] is None
    found, failure = _judge.scored_host_time([0.05 + 1.8] * 50, [0.0] * 50, null, [0.0] * 5, [2] * 50)
    assert failure is not None and found is not None and found.allowed_ms == pytest.approx(1.65)
    found, failure = _judge.scored_host_time([0.05 + 1.8] * 50, [0.0] * 50, null, [0.0] * 5, [4] * 50)
    assert failure is None and found is not None and found.allowed_ms == pytest.approx(1.85)


def test_the_host_rule_waits_for_its_figures() -> None:
    assert _judge.scored_host_time([], [], [0.2], [0.1], []) == (None, None)
    assert _judge.scored_host_time([1.0], [0.1], [], [0.1], [1]) == (None, None)
    assert _judge.scored_host_time([1.0], [0.1], [0.2], [], [1]) == (None, None)


def test_an_eager_answer_no_draw_saw_is_rejected_by_its_host_time_alone(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rt23 F1's encoding (an answer keyed on an input, which no decode map recovered before session 38) passes every
    other rule with the work rule off; the
    scored calls' host work beyond the draws' eager operators rejects it, and its honest twin (the same eager cost on
    every call, the draws included) passes."""
    case = ADVERSARIAL / "eager_answer_keyed_on_an_input_p36.py"
    timing_rules_off(monkeypatch, keep=("host_time",))
    twin_draw_off(monkeypatch)  # (its number differs on the twin draw)
    # its kernel is told which calls are draws by a number (0 there, 1 elsewhere), which the fixed-arguments rule
    # rejects first (``_coverage.fixed_check``); this test is of the host-time rule alone
    monkeypatch.setattr(_coverage, "fixed_check", lambda changed: ({}, None))
    # and since session 38 the evidence calls' decode rule takes part of the keyed answer from the launch's work (61%
    # in one run), which the work rule rejects first
    monkeypatch.setattr(_coverage, "WORK_SHARE", 0.0)
    monkeypatch.setattr(_coverage, "FLOAT_SHARE_MARGIN", 1.0)
    report = cpu_session.verify(case, "p36", "tirx")
    assert report.failure == "decorative_dsl" and "host work" in report.feedback, report.feedback
    figures = report.details["host_time"]
    assert figures["own_ms"] > figures["allowed_ms"] > figures["draws_eager_ms"]
    twin = cpu_session.verify(Path(__file__).with_name("honest") / "eager_staging_every_call_p36.py", "p36", "tirx")
    assert twin.passed, twin.feedback
    assert twin.details["host_time"]["draws_eager_ms"] > twin.details["host_time"]["own_ms"]
    timing_rules_off(monkeypatch)
    assert cpu_session.verify(case, "p36", "tirx").passed


def test_eager_work_on_the_timed_calls_only_is_priced_in_the_plan(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team rt45 F1's class: the draws are observable, so a kernel can leave a tenth of its rows to eager code
    on every other call, within the work rule's margin; that tenth is the plan's eager share (it was a full plan at
    0%), and a protocol requiring full plans fails it. Since session 39 the stale draw rejects it first (its switch is
    a flag the draws leave fresh: given the timed call's, the kernel leaves rows to an eager answer of other inputs);
    the price is the rule that remains where a switch escapes both draws. (On the cpu the twin draw compares the flag
    too, written on the timed calls, the fill on the draw: whichever of the two runs first rejects it.)"""
    case = EVIDENCE / "timed_rows_left_eager_p36.py"
    twinned = cpu_session.verify(case, "p36", "tirx")
    assert (twinned.failure, "one of the timed calls' launches found" in twinned.feedback) in {
        ("wrong_output", True), ("decorative_dsl", False)}, twinned.feedback  # fmt: skip
    assert twinned.failure == "wrong_output" or "On the inputs of one of the timed calls" in twinned.feedback
    twin_draw_off(monkeypatch)
    report = cpu_session.verify(case, "p36", "tirx")
    assert report.passed, report.feedback
    shortfall = report.details["timed_work"]["float_shortfall"]
    assert 0.05 <= shortfall <= 0.15
    assert (report.plan, report.plan_eager_share) == ("partial", shortfall)
    assert report.details["eager_work"]["plan"]["timed"] is True
    assert re.search(r"made \d+% of an output on the timed calls", report.feedback), report.feedback
    strict = cpu_session.verify(case, "p36", "tirx", protocol=resolve_protocol("paper", require_full_plan=True))
    assert strict.failure == "partial_plan" and "on the timed calls" in strict.feedback


def test_an_eager_part_decoded_on_the_timed_calls_only_is_priced_in_the_plan(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team rt48 F4's class: an input-made switch past the fixed-arguments rule's small tensors tells the kernel
    to decode an eighth of the rows from an eager workspace on the timed calls alone; the decode rule's maps under its
    half, held against the draws' (``_decode.DECODE_CONTRAST``), take that eighth from the launch's work: a partial
    plan (it was full at 3%). Since session 39 the twin draw rejects it first (the switch differs), or, on a loaded
    machine, the work rule does (its timed calls' share of the output measured under the draws' by more than the
    margin: 83.7% against 85% in one run beside a red team)."""
    case = EVIDENCE / "timed_rows_decoded_an_eighth_p36.py"
    twinned = cpu_session.verify(case, "p36", "tirx")
    assert twinned.failure == "decorative_dsl", twinned.feedback
    twin_draw_off(monkeypatch)
    report = cpu_session.verify(case, "p36", "tirx")
    assert report.passed, report.feedback
    shortfall = report.details["timed_work"]["float_shortfall"]
    assert 0.05 <= shortfall <= 0.2, shortfall
    assert report.plan == "partial" and report.plan_eager_share >= shortfall, (report.plan, report.plan_eager_share)


def test_the_kept_evidence_calls_are_not_told_by_resident_memory(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team rt59 F0: the vault freed an evidence call's copies as its launch ended unless the call was kept for a
    twin draw, so the resident memory around a launch over a 40 MB buffer told the kept calls (4 copies) from the others
    (3), and an eager answer on every other call passed. The twin draws' copies now go into slots touched before the
    timing (``open_slots``), a kept call's slot kept, another's the next call's: one growth for all of them, and not the
    twin copy's. (The probe's watched launches copy 40 MB: the DSL-time rules off.)"""
    timing_rules_off(monkeypatch)
    report = cpu_session.verify(EVIDENCE / "probe_kept_by_resident_memory_p36.py", "p36", "tirx")
    found = re.search(r"GROWTH ([0-9. ]+)", report.feedback or "")
    assert found is not None, report.feedback
    growth = [float(g) for g in found.group(1).split()]
    watched = [g for g in growth if g >= 0.5]  # (a scored call copies nothing)
    assert len(watched) == _phases.EVIDENCE_CALLS, growth
    assert len(set(watched)) == 1, growth
    assert watched[0] <= 3.0, growth  # (the gate's own copies of a launch; the twin copy is in its slot)
