"""The twin and the stale draw turned off (verifier README, "The twin draw"): a test of another rule that judges the
timed calls against the draws, by a case the twin draw rejects first, then shows that rule alone."""

from __future__ import annotations

import pytest


def twin_draw_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """The verification's phases without ``_phases.twin_draw``."""
    from mkbsim.verifier import _phases, _session

    monkeypatch.setattr(_session, "PHASES", tuple(p for p in _phases.PHASES if p[1] is not _phases.twin_draw))
