"""The twin and the stale draw turned off (verifier README, "The twin draw"): a test of another rule that judges the
timed calls against the draws, by a case the twin draw rejects first, then shows that rule alone."""

from __future__ import annotations

import pytest


def twin_draw_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """The verification's phases without ``_phases.twin_draw``."""
    from mkbsim.verifier import _phases, _session

    monkeypatch.setattr(_session, "PHASES", tuple(p for p in _phases.PHASES if p[1] is not _phases.twin_draw))


def one_draw_after_timing(monkeypatch: pytest.MonkeyPatch, kept: str) -> None:
    """Of the twin and the stale draw (run in an order drawn per verification), only ``kept`` ("twin" or "stale"):
    a test of what that one alone rejects."""
    from mkbsim.verifier import _phases

    monkeypatch.setattr(_phases, "_stale" if kept == "twin" else "_twin", lambda *args: None)
