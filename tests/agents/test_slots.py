"""Verifier slots: one verifier process per slot (on cuda, slot i sees GPU i % n), restarted after a crash."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_kit import TIRX_KERNEL

from mkbsim.agents import ScoringSlots, VerifierSlots, default_verifier_slots
from mkbsim.catalog import Problem

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def slots() -> Iterator[VerifierSlots]:
    with VerifierSlots("cpu", "paper", slots=2) as s:
        yield s


def test_each_slot_verifies_in_its_own_process_and_a_dead_one_is_restarted(
    slots: VerifierSlots, p36: Problem, tmp_path: Path
) -> None:
    kernel = tmp_path / "kernel.py"
    kernel.write_text(TIRX_KERNEL)
    verdict = slots.for_slot(1)(p36, "tirx").score(kernel, attempt_id="a1", submission=1)
    assert verdict.payload["correct"] and verdict.payload["attempt_id"] == "a1", verdict.feedback
    assert verdict.payload["backend"] == "cpu" and verdict.payload["submission"] == 1
    first = slots.process(1)
    assert slots.process(0) is not first  # slot 0 has a process of its own
    os.kill(first._proc.pid, signal.SIGKILL)
    first._proc.wait()
    again = slots.for_slot(1)(p36, "tirx").score(kernel, attempt_id="a1", submission="final")
    assert again.payload["correct"] and slots.process(1) is not first


def test_slot_placement_and_defaults(slots: VerifierSlots) -> None:
    assert slots.count == 2 and slots.device_of(1) is None  # cpu: no GPU
    slots.gpus = ["2", "5"]  # as if CUDA_VISIBLE_DEVICES=2,5: slot i -> GPU i % 2
    try:
        assert [slots.device_of(i) for i in range(4)] == ["2", "5", "2", "5"]
    finally:
        slots.gpus = []
    assert default_verifier_slots("cpu") == max(1, len(os.sched_getaffinity(0)) // 2)
    with pytest.raises(ValueError, match="must be positive"):
        ScoringSlots(0)
