"""What a call of a block can reach (DESIGN §5, timing; verifier README, "Blocks"): no later call's memory through
its tensors' storage; a draw's warm-ups and a timed plan's warm-ups run in blocks of their own; the outputs a call
delivered are what the verifier reads; work several calls need, done in a few of them, shows in the block's
total."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest
import torch

from mkbsim.verifier import VerifierSession, _blocks, _control
from mkbsim.verifier._mapped import delivered_layout, delivered_lib, delivered_vault, vault_requests
from mkbsim.verifier._trusted import Trusted
from mkbsim.verifier._vault import Registry
from tests.kits.timing_rules import timing_rules_off

EVIDENCE = Path(__file__).with_name("evidence")


def _calls(costs: list[float], kind: str = "timed") -> list[tuple[str, Trusted]]:
    return [(kind, Trusted(round_trip_ms=ms, cpu_ms=ms, idle_cpu_ms=0.0)) for ms in costs]


def test_a_block_of_even_calls_passes_and_one_doing_the_others_work_fails() -> None:
    harness, work = 0.3, 0.5
    nulls = _calls([harness] * 25, "null")
    even = _calls([harness + work * (1 + 0.1 * (i % 3)) for i in range(60)]) + nulls
    found, reason = _blocks.total_check([even], "cpu")
    assert reason is None and found["ratios"][0] < 1.0
    # the same work, 59 calls doing a tenth of theirs and one the rest: the median falls 10x, the total does not
    light = harness + work / 10
    concentrated = _calls([light] * 59 + [harness + 60 * work - 59 * work / 10]) + nulls
    found, reason = _blocks.total_check([concentrated], "cpu")
    assert reason is not None and "timing block 1" in reason, found


def test_the_rule_bounds_what_moving_work_between_calls_gains() -> None:
    """Work hidden per call: at most TOTAL_SLACK of the median's work plus NULL_SPREAD_FACTOR of the null calls'
    spread (their mean distance from their median), and one call's worth per block; the harness's level (what it
    copies per call) buys nothing (red team rt12 F2)."""
    median_work, n = 1.0, 60
    for harness in (0.3, 4.8):
        nulls = [harness] * 13 + [harness - 0.05] * 6 + [harness + 0.05] * 6  # spread 0.024 ms
        spread = statistics.fmean(abs(x - harness) for x in nulls)
        bound = _blocks.TOTAL_SLACK["cpu"] * median_work + _blocks.NULL_SPREAD_FACTOR * spread * (n + 25) / n
        bound += (median_work + 0.05) / n  # one timed call's own work and the null calls' worst, per block
        for hidden, passes in ((0.9 * bound, True), (1.1 * bound, False)):
            calls = _calls([harness + median_work] * (n - 1) + [harness + median_work + n * hidden])
            assert (_blocks.total_check([calls + _calls(nulls, "null")], "cpu")[1] is None) is passes, harness


def _delivered(inplace: tuple[int, ...]) -> tuple[_control.ControlPage, dict[str, Any]]:
    """A control page and the harness's hooks to a ``delivered_vault`` over it."""
    control, registry = _control.ControlPage(), Registry()
    send = registry.open(delivered_vault, control.buf, delivered_lib(), delivered_layout(), inplace)
    return control, vault_requests(registry.protect, send)


def test_the_outputs_and_in_place_results_a_call_delivered_are_put_back_over_a_later_rewrite() -> None:
    """Each call's output slots and in-place inputs, copied aside right after it, go back after the block: a later
    call (or code between calls) rewriting them changes nothing (adversarial/block_slot_rewrite_p36.py,
    block_inplace_rewrite_p25.py)."""
    control, hooks = _delivered(inplace=(1,))
    arenas: list[tuple[list[torch.Tensor], list[Any]]] = [
        ([torch.zeros(4), torch.zeros(3)], [torch.zeros(4), None, torch.zeros(2, dtype=torch.int32)]) for _ in range(2)
    ]
    control.begin_block([(False, False, False, False)] * 2)
    memory = object()  # the block's memory (map_block's), held by the vault, not by the harness's frame
    hooks["open"](arenas, [0, 1], memory)
    for call in range(2):
        _control.put(control.buf, _control.BLOCK_NEXT, call + 1)  # the timer's vault loads the call...
        _control.put(control.buf, _control.AUDIT, call)  # ...and its orders: the second call is a correctness draw
        args, outputs = hooks["arena"]()
        assert args is arenas[call][0]
        outputs[0].fill_(1.0 + call)  # what the call delivered
        outputs[2].fill_(3)
        args[1].fill_(5.0)
        assert hooks["audited"]() == call  # asked after the call
        hooks["keep"]()
        for args, outputs in arenas:  # a later rewrite of every call's slots and in-place input
            outputs[0].fill_(9.0)
            outputs[2].fill_(9)
            args[1].fill_(9.0)
    _control.put(control.buf, _control.BLOCK_CALLS, 0)  # the timer's END
    held = hooks["restore"]()
    assert held is not None and held[3] is memory
    assert not _control.get(control.buf, _control.BLOCK_FAULT)
    for call, (args, outputs) in enumerate(arenas):
        assert outputs[0].tolist() == [1.0 + call] * 4 and outputs[2].tolist() == [3, 3]
        assert args[1].tolist() == [5.0] * 3 and args[0].tolist() == [0.0] * 4  # an input not in place: not kept
    control.close()


@pytest.mark.parametrize(
    "forged", ["second keep", "keep before a call", "second audited", "open", "restore", "malformed"]
)
def test_a_request_out_of_the_harness_order_fails_the_block(forged: str) -> None:
    """The vault copies only the call the timer's vault has loaded, once, and tells the harness once whether it was
    a correctness draw: a request the submission sends (its hooks are reachable from a frame) marks the block, and
    the vault answers nothing more."""
    control, hooks = _delivered(inplace=())
    arenas = [([torch.zeros(2)], [torch.zeros(2)])]
    control.begin_block([(False, False, False, False)])
    hooks["open"](arenas, [0], None)
    if forged != "keep before a call":
        _control.put(control.buf, _control.BLOCK_NEXT, 1)
    {
        "second keep": lambda: (hooks["keep"](), hooks["keep"]()),
        "keep before a call": hooks["keep"],
        "second audited": lambda: (hooks["audited"](), hooks["audited"]()),
        "open": lambda: hooks["open"](arenas, [0], None),
        "restore": lambda: (hooks["restore"](), hooks["keep"]()),
        "malformed": lambda: hooks["open"](object(), None, None),
    }[forged]()
    assert _control.get(control.buf, _control.BLOCK_FAULT) == 1
    _control.put(control.buf, _control.BLOCK_NEXT, 1)
    assert hooks["arena"]() is None
    control.close()


@pytest.mark.parametrize(
    ("case", "problem"),
    [("block_lookahead_first_call_p28.py", "p28"), ("block_lookahead_spread_p28.py", "p28"),
     ("block_lookahead_copy_p26.py", "p26")],
)  # fmt: skip
def test_a_look_ahead_through_a_call_s_storage_reaches_no_later_call(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch, case: str, problem: str
) -> None:
    """Each call's memory is a storage of its own (``_mapped.block_memory``): the look-ahead cases, which view the
    later arenas of their block through their input's storage and compute their answers early (one call launching
    the kernel for several), find none, and every timed call launches the kernel once. With the whole block in one
    storage, their look-ahead calls launched 3-4 times (the block's first call of first_call_p28, one in 4 of
    spread_p28, one in 2 of copy_p26: red team rt12 F0, which passed at production on cpu) and the later calls
    copied what was computed for them. The timing rules are off (tests/kits): what a call reaches is no timing
    verdict; the block-total rule's own cases are in test_blocks.py and above."""
    timing_rules_off(monkeypatch)
    report = cpu_session.verify(EVIDENCE / case, problem, "tirx")
    assert report.passed, report.feedback
    assert set(report.details["timing"]["launches_per_call"]) == {1}, report.details["timing"]["launches_per_call"]


def test_the_harness_s_frames_below_run_hold_no_other_call_s_memory(cpu_session: VerifierSession) -> None:
    """run() reaches the harness's frames (``f_locals``): the block runner's held the block's memory, every call's arena
    in it, until the block's vault took it (``_worker._run_block``, ``_mapped.delivered_vault``'s OPEN). The case
    raises on a scored call naming any frame local below run() that holds memory outside its own arena (before:
    ``_run_block.memory``)."""
    report = cpu_session.verify(EVIDENCE / "block_memory_through_frames_p36.py", "p36", "tirx", static_scan=False)
    assert report.passed, report.feedback


def test_a_planned_block_s_warm_ups_are_sent_as_a_block_of_their_own() -> None:
    scored = ["timed", "null", "evidence"]
    for planned in _blocks.plan(scored * 20, 10, 1000, 31_000, distinct=False):
        sent = _blocks.parts(planned)
        assert [kinds[0] == "warmup" for kinds in sent] == [True, False]
        assert all(set(kinds) == {"warmup"} for kinds in sent[:1]) and "warmup" not in sent[1]
        assert sent[0] + sent[1] == planned
    assert _blocks.parts(["warmup"] * 3) == [["warmup"] * 3]
