"""The verifier's timing rules turned off but the ones a test is about (DESIGN §5): a test of one rule, or of a
rule that is no timing rule at all, then has an outcome that a loaded machine's noise in the others cannot
decide (verifier README, "Timing verdicts are confirmed")."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pytest

#: idle: CPU between calls and device work after them; dsl_time and scored_time: "timed as audited";
#: clock: the trusted clock's cross-check; calibration: the null calls slowed (cpu: threads beside the calling one
#: spending CPU during them; cuda: against the eager worker's); block_total: a
#: scored block's calls in all against their medians; host_time: the scored calls' host work against the draws' eager
#: operators' (cpu).
RULES = ("idle", "dsl_time", "scored_time", "clock", "calibration", "block_total", "host_time")


def timing_rules_off(monkeypatch: pytest.MonkeyPatch, keep: Collection[str] = ()) -> None:
    """Every timing rule off but those in ``keep`` (the speed of light stays: no honest time beats it)."""
    from mkbsim.verifier import _coverage, _phases

    unknown = set(keep) - set(RULES)
    assert not unknown, f"no timing rule {sorted(unknown)}"

    def silent(*args: Any) -> None:
        return None

    if "idle" not in keep:
        monkeypatch.setattr(_phases, "idle_check", silent)
        monkeypatch.setattr(_phases, "pending_check", silent)
    if "dsl_time" not in keep:
        monkeypatch.setattr(_coverage, "dsl_time_check", lambda *args: ({}, None))
    if "scored_time" not in keep:
        monkeypatch.setattr(_phases, "scored_time", silent)
        monkeypatch.setattr(_phases, "scored_dsl_time", silent)
    if "clock" not in keep:
        monkeypatch.setattr(_phases, "trusted_cross_check", lambda *args: {"tampered": None})
    if "host_time" not in keep:
        monkeypatch.setattr(_phases, "scored_host_time", lambda *args: (None, None))
    if "block_total" not in keep:
        monkeypatch.setattr(_phases, "block_total_check", lambda *args: ({}, None))
    if "calibration" not in keep:
        monkeypatch.setattr(_phases, "beside_check", silent)
        monkeypatch.setattr(_phases, "calibration_check", silent)
