"""The coverage rule of the bypass test (``_coverage``) and the speed-of-light bound, on their own."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from mkbsim.verifier import VerifierSession, _coverage, _eagerwork, _phases
from mkbsim.verifier._compare import build_refs
from mkbsim.verifier._control import ControlPage
from mkbsim.verifier._coverage import (
    OUTPUT_SHARE,
    OUTPUTS_SHARE,
    TOTAL_SHARE,
    OutputCoverage,
    informative_mask,
    judge,
    suppressed_shares,
)
from mkbsim.verifier._devices import REMEASURES, best_profile, speed_of_light
from mkbsim.verifier._judge import Failure
from tests.kits.timing_rules import timing_rules_off

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "submissions" / "p36_rmsnorm_tirx.py"
ADVERSARIAL = Path(__file__).with_name("adversarial")


def _cov(label: str, n: int, wrong: float, eager: float = 0.0) -> OutputCoverage:
    return OutputCoverage(label, n, suppressed_wrong=wrong, eager_match=eager, eager_source="x" if eager else None)


def test_the_study_s_partial_plans_pass() -> None:
    # p49 at its production shape: the DSL computes the top-k weights and ids (8 per token), eager the 256 logits
    tokens = 16384
    p49 = judge(
        [_cov("weights", 8 * tokens, 1.0), _cov("ids", 8 * tokens, 1.0), _cov("logits", 256 * tokens, 0.0, 1.0)]
    )
    assert p49.failure is None and p49.total_share > TOTAL_SHARE
    # p52: the DSL quantises, the eager GEMM consumes it: every output element depends on the kernel
    assert judge([_cov("out", 4096, 1.0)]).failure is None


def test_a_sliver_of_the_work_in_the_dsl_fails() -> None:
    one_row = judge([_cov("out", 64 * 128, 1 / 64)])
    assert one_row.failure and "stayed correct" in one_row.failure
    one_layer = judge([_cov("out", 32 * 4096, 1 / 32)])
    assert one_layer.failure
    # the small output of a two-output problem wholly in the DSL, the large one eager
    lse = judge([_cov("output", 128 * 1000, 0.0, 1.0), _cov("lse", 1000, 1.0)])
    assert lse.failure and TOTAL_SHARE > 1000 / 129000


def test_one_small_output_does_not_carry_the_others() -> None:
    """p49 with only the ids the DSL's (2.9% of the elements, above 1/64: passed before), the weights and the logits
    eager: one output of three."""
    tokens = 16384
    ids_only = judge(
        [_cov("weights", 8 * tokens, 0.0, 1.0), _cov("ids", 8 * tokens, 1.0), _cov("logits", 256 * tokens, 0.0, 1.0)]
    )
    assert ids_only.total_share > TOTAL_SHARE and ids_only.outputs_share < OUTPUTS_SHARE
    assert ids_only.failure and "on average" in ids_only.failure


def test_an_answer_that_existed_outside_the_dsl_is_not_the_dsl_s() -> None:
    # wrong everywhere with launches suppressed (a canary), yet its values were an eager tensor's
    canary = judge([_cov("out", 8192, 1.0, eager=0.97)])
    assert canary.failure and "existed outside the DSL" in canary.failure
    assert canary.outputs[0].dsl_share < OUTPUT_SHARE


def test_only_input_dependent_elements_count() -> None:
    a = torch.tensor([0.0, 1.0, 2.0, 0.0])
    b = torch.tensor([0.0, 3.0, 5.0, 0.0])  # another draw: the zeros are padding
    ref_a, ref_b = build_refs(["o", "o"], [a, b], [a.double(), b.double()], [torch.float32] * 2, 3.0)
    assert informative_mask(ref_a, ref_b, None).tolist() == [False, True, True, False]
    # in place: the elements the operator changed
    cache_before = torch.tensor([1.0, 1.0, 1.0, 1.0])
    assert informative_mask(ref_a, None, cache_before).tolist() == [True, False, True, True]


def test_elements_a_zero_gets_right_are_not_judged() -> None:
    """Red team rt40 FP1: an honest kernel writing p65's heavy-tailed output into ``zeros_like`` left zeros with its
    launches suppressed, "correct" within the allowance (eps · max|anchor|) on 69% of it: a DSL share of 0.31."""
    gen = torch.Generator().manual_seed(0)
    heavy = torch.randn(4096, generator=gen) * 3.0
    heavy[::512] = 100.0  # a few large values: the allowance 3 · eps(bf16) · 100, about 2.3
    other = torch.randn(4096, generator=gen)
    heavy_bf16, other_bf16 = heavy.to(torch.bfloat16), other.to(torch.bfloat16)
    ref, ref_other = build_refs(["o", "o"], [heavy_bf16, other_bf16], [heavy_bf16.double(), other_bf16.double()],
                                [torch.bfloat16] * 2, 3.0)  # fmt: skip
    zeros = torch.zeros_like(heavy_bf16)
    whole = suppressed_shares([zeros], [ref], [torch.ones(4096, dtype=torch.bool)])[0].suppressed_wrong
    judged = informative_mask(ref, ref_other, None)
    assert whole is not None and whole < 0.5  # judged on every element, the zeros look like no DSL work
    assert suppressed_shares([zeros], [ref], [judged])[0].suppressed_wrong == 1.0
    assert 0.125 < judged.float().mean() < 0.5
    # an output near zero throughout (a zero gets nearly all of it right) is judged whole, as before
    flat = torch.cat([torch.full((8,), 1000.0), torch.randn(4088, generator=gen)]).to(torch.bfloat16)
    (ref_flat,) = build_refs(["o"], [flat], [flat.double()], [torch.bfloat16], 3.0)
    assert torch.equal(informative_mask(ref_flat, ref_other, None), flat != other_bf16)


def test_a_median_below_the_speed_of_light_is_timing_tamper(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    timing_rules_off(monkeypatch)  # the speed of light alone: another timing rule's noise under load decides nothing
    saved = cpu_session._profile
    # a device so slow that the honest kernel's measured median beats its speed of light
    slow = {"bandwidth_bytes_per_s": 1.0, "peak_flops_per_s": {k: 1.0 for k in ("fp32", "bf16", "fp8", "fp4", "int")}}
    cpu_session._profile = ("a slow device", slow)
    try:
        report = cpu_session.verify(EXAMPLE, "p36", "tirx")
    finally:
        cpu_session._profile = saved
    assert report.failure == "timing_tamper" and "speed of light" in report.feedback
    # judged once, after the timing rounds (which passed) and with the candidate's worker closed
    assert [r["failure"] for r in report.details["timing_rounds"]] == [None]
    assert report.details["phases_run"][-1] == "speed_of_light"
    assert report.speedup is None and report.runtime_ms is None
    honest = cpu_session.verify(EXAMPLE, "p36", "tirx")
    assert honest.passed and 0 < honest.details["sol"]["fraction"] <= 1, (honest.failure, honest.feedback)


def test_times_forged_in_the_control_page_fail_the_trusted_clock(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    timing_rules_off(monkeypatch, keep=("clock",))
    # a kernel that really takes 2 ms of CPU time per call, far above this machine's noise
    slow = tmp_path / "slow.py"
    spin = "\n\nimport time\n_kernel_run = run\n\n\ndef run(*inputs):\n    t = time.thread_time()\n"
    slow.write_text(EXAMPLE.read_text() + spin + "    while time.thread_time() - t < 0.002:\n        pass\n"
                    "    return _kernel_run(*inputs)\n")  # fmt: skip
    assert cpu_session.verify(slow, "p36", "tirx").passed  # reported as measured: no false alarm
    # what a worker could do with native code writing its own memory: report a twentieth of every call
    honest_report = ControlPage.report

    def forged(page: ControlPage, samples: Sequence[int] = (), **call: Any) -> dict[str, Any]:
        report = honest_report(page, samples, **call)  # the header's call, or a block's slot
        report["ms"] = report["ms"] / 20
        report["host_ms"] = report["host_ms"] / 20
        return report

    monkeypatch.setattr(ControlPage, "report", forged)
    report = cpu_session.verify(slow, "p36", "tirx")
    assert report.failure == "timing_tamper", report.feedback
    assert "verifier's cpu clock" in report.feedback


def test_coincidence_of_low_precision_values_is_not_eager_work() -> None:
    # an fp8 in-place KV append: the old cache holds each fresh entry's value at ~13% of positions by chance (256
    # values), which read as "13% existed outside the DSL" and rejected both honest p21 solutions on the H200
    from mkbsim.verifier._compare import build_refs
    from mkbsim.verifier._coverage import _beyond_chance

    gen = torch.Generator().manual_seed(0)
    answer = (torch.randint(0, 6, (4096,), generator=gen).float() - 3).to(torch.float8_e4m3fn)
    ref = build_refs(["cache"], [answer], [answer.double()], [torch.float8_e4m3fn], 3.0)[0]
    positions = torch.randperm(4096, generator=gen)[:512]
    informative = torch.ones(512, dtype=torch.bool)
    unrelated = (torch.randint(0, 6, (4096,), generator=gen).float() - 3)[positions].tolist()
    plain = float(matches_share(unrelated, ref, positions))
    assert plain > 0.1, "the premise: unrelated fp8 values agree often by chance"
    assert _beyond_chance(unrelated, ref, positions, informative) < 0.05
    copy = answer.float()[positions].tolist()
    assert _beyond_chance(copy, ref, positions, informative) > 0.95


def matches_share(values: list[float], ref: object, positions: torch.Tensor) -> float:
    from mkbsim.verifier._compare import matches

    return float(matches(values, ref, positions).float().mean())  # type: ignore[arg-type]


def _peaks(bandwidth: float) -> dict[str, Any]:
    return {
        "bandwidth_bytes_per_s": bandwidth, "cache_bandwidth_bytes_per_s": bandwidth, "cache_bytes": 1 << 20,
        "peak_flops_per_s": {k: 1e12 for k in ("fp32", "bf16", "fp8", "fp4", "int")},
    }  # fmt: skip


def test_a_measured_speed_of_light_a_median_beats_is_measured_again_and_the_fastest_kept() -> None:
    """An honest 1.57 ms block copy of 8 MB (p25) against a calibration taken at a busy moment (1.5 GB/s: SOL
    5.6 ms) was ``timing_tamper``; the same machine measured 26 GB/s when quiet. A measurement only ever comes
    out slower than the device, so the fastest of further measurements decides."""
    cost = SimpleNamespace(bytes=8_388_672, flops={})
    runtime = 1.568
    busy, quiet = _peaks(1.5e9), _peaks(26e9)
    assert speed_of_light(cost, busy)["sol_ms"] > runtime  # judged once, as before
    measured = iter([_peaks(1.6e9), quiet, _peaks(2e9)])
    calls: list[int] = []

    def measure() -> dict[str, Any]:
        calls.append(1)
        return next(measured)

    best = best_profile(busy, measure, lambda p: runtime < speed_of_light(cost, p)["sol_ms"])
    assert speed_of_light(cost, best)["sol_ms"] < runtime and len(calls) == 2  # stops once not beaten
    # a median below every measurement stays below: REMEASURES at most, each merged into the fastest
    calls.clear()
    measured = iter([_peaks(1.6e9)] * REMEASURES)
    worst = best_profile(busy, measure, lambda p: speed_of_light(cost, p)["sol_ms"] > 0.01)
    assert len(calls) == REMEASURES and worst["bandwidth_bytes_per_s"] == 1.6e9


def test_the_session_measures_its_own_profile_again_never_a_documented_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from mkbsim.verifier import _session

    monkeypatch.setattr(_session, "measure_profile", lambda device, cache_bytes: _peaks(26e9))
    with VerifierSession("cpu") as session:
        problem = session.problem("p25")
        axes = problem.smoke
        first = session.speed_of_light(problem, axes)["sol_ms"]
        session._profile = session._measured = ("cpu (measured)", _peaks(1.5e9))  # calibrated at a busy moment
        slow = session.speed_of_light(problem, axes)["sol_ms"]
        assert slow > first
        assert session.speed_of_light(problem, axes, first * 1.5)["sol_ms"] == first
        session._profile = ("a documented device", _peaks(1.5e9))  # never measured again
        assert session.speed_of_light(problem, axes, first * 1.5)["sol_ms"] == slow


def test_one_of_two_outputs_wholly_eager_is_not_most_of_the_answer() -> None:
    """Red team 9a's p72 case: the DSL's new state, eager output (0.5 on average: passed at least half); the study's
    p49 plan, two of three, passes."""
    half = judge([_cov("output", 4096, 0.0, 1.0), _cov("new_state", 65536, 1.0)])
    assert half.outputs_share == OUTPUTS_SHARE and half.failure and "on average" in half.failure
    assert judge([_cov("output", 4096, 0.02, 0.98), _cov("new_state", 65536, 1.0)]).failure is None


def test_the_in_place_state_is_one_part_weighted_by_what_changes() -> None:
    """Red team rt10 F5 (p26): a Python answer copied into the slot mappings (0% the DSL's), the block table and its
    counts updated by a kernel (10 and 7 changed elements): counted once each, 2/3 on average, passed. The state is
    one part of the answer, weighted within by its changed elements: half, which is not most of it."""
    found = [_cov("slot_mappings", 150, 0.0, 1.0), _cov("block_tables", 10, 1.0), _cov("num_blocks", 7, 1.0)]
    assert judge(found).failure is None  # each counted once, as before
    state = judge(found, inplace=2)
    assert state.outputs_share == OUTPUTS_SHARE and state.failure and "on average" in state.failure
    # an honest p21 kernel (four caches, the fp8 codes matched by chance at 8% of their elements) keeps its margin
    p21 = [_cov("key_cache", 45512, 0.918), _cov("value_cache", 45486, 0.917), _cov("k_scale", 360, 1.0),
           _cov("v_scale", 360, 1.0)]  # fmt: skip
    assert judge(p21, inplace=4).failure is None and judge(p21, inplace=4).outputs_share > 0.9
    # a kernel writing the outputs and the state alike passes either way
    whole = [_cov("q_out", 4096, 1.0), _cov("key_cache", 512, 1.0), _cov("value_cache", 512, 1.0)]
    assert judge(whole, inplace=2).failure is None


@pytest.mark.parametrize("state_as_one_part", [False, True])
def test_a_state_updated_by_a_kernel_does_not_carry_a_copied_answer(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch, state_as_one_part: bool
) -> None:
    """adversarial/state_carries_copied_answer_p26.py with the plain-Python rule off (which also rejects it): its
    slot mappings, a Python answer the kernel copies, are 0% the DSL's; the block table and counts it updates carried
    the average when counted as two outputs (passed), not as one state."""
    monkeypatch.setattr(_eagerwork, "PYTHON_SHARE", math.inf)
    monkeypatch.setattr(_phases, "timing", lambda v: Failure("timeout", "not timed: the test judges coverage alone"))
    if not state_as_one_part:
        judge_parts = _coverage.judge
        monkeypatch.setattr(_coverage, "judge", lambda found, inplace=0: judge_parts(found))
    report = cpu_session.verify(ADVERSARIAL / "state_carries_copied_answer_p26.py", "p26", "tirx")
    assert report.correct, report.feedback
    (slots, *state) = report.details["bypass"][-1]["outputs"]
    assert slots["dsl_share"] == 0.0 and all(s["dsl_share"] == 1.0 for s in state)
    if state_as_one_part:
        assert report.failure == "decorative_dsl" and "on average" in report.feedback
    else:
        assert report.bypass_ok and report.failure == "timeout", report.feedback


def test_fixed_check_fails_where_most_evidence_calls_change_a_value_every_draw_gave() -> None:
    """A launch argument the draws all gave one value: given another on more than half of the evidence calls (the
    median call), the timed calls run work the draws did not check; on half or fewer, a count the data draws from a
    few values may have repeated on the draws by chance."""
    same, number, contents = (0, 0, 0, 0), (1, 11, 0, 0), (2, 4, 0, 0)
    assert _coverage.fixed_check([same] * 10)[1] is None
    assert _coverage.fixed_check([number] * 5 + [same] * 5)[1] is None
    found, feedback = _coverage.fixed_check([number] * 4 + [contents] * 2 + [same] * 4)
    assert found["calls_changed"] == [1, 2, 3, 4, 5, 6]
    assert found["arguments"] == {"value": [10], "contents": [3]}
    assert feedback is not None and "6 of 10 timed calls" in feedback
    assert "argument 10's value and argument 3's contents" in feedback
    assert _coverage.fixed_check([None] * 6 + [same] * 4)[1] is not None  # a call without the record: changed


def test_fixed_check_judges_bytes_alike_by_chance_only_where_one_differed_on_every_call() -> None:
    """A small tensor's byte the data made, alike on the five draws by chance, marks no call on its own: the last
    evidence call's record says whether one such byte differed on every evidence call so far (a switch set on every
    timed call), and only then, on at least ``FIXED_CHANCE_CALLS`` calls, the timed calls ran other work."""
    same, chance_so_far = (0, 0, 0, 0), (0, 0, 1, 3)
    assert _coverage.fixed_check([same] * 9 + [chance_so_far])[1] is not None
    found, feedback = _coverage.fixed_check([chance_so_far] * 9 + [same])  # the last call's bytes were alike
    assert feedback is None and not found["every_call"]
    found, feedback = _coverage.fixed_check([chance_so_far] * 10)
    assert found["every_call"] and found["arguments"]["contents"] == [2]
    assert feedback is not None and "10 of 10 timed calls" in feedback and "argument 2's contents" in feedback
    few = _coverage.FIXED_CHANCE_CALLS - 1
    assert _coverage.fixed_check([chance_so_far] * few)[1] is None  # too few calls to tell a switch from chance
