"""Every DSL launch on the cpu runs in one floating-point state, whatever the submission set before it: a kernel
cannot be told which call it is in by flush-to-zero (red team rt55 F1; the vault's BEFORE, ``flush_denormal``)."""

from __future__ import annotations

from pathlib import Path

import torch

from mkbsim.verifier import VerifierSession

EVIDENCE = Path(__file__).with_name("evidence")


def test_a_kernel_reads_no_flush_to_zero_switch(cpu_session: VerifierSession) -> None:
    report = cpu_session.verify(EVIDENCE / "flush_to_zero_switch_p36.py", "p36", "tirx")
    assert report.passed, report.feedback


def test_the_probe_sees_flush_to_zero_where_it_is_on() -> None:
    """The switch works where nothing resets the state: the test above could not fail otherwise."""
    tiny = torch.tensor([1e-30], dtype=torch.float32)
    try:
        assert torch.set_flush_denormal(True)
        assert float(tiny * 1e-10) == 0.0
    finally:
        torch.set_flush_denormal(False)
    assert float(tiny * 1e-10) != 0.0
