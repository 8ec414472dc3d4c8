"""Resuming in process: retried tries, refused plan changes, the same events as the simulator's own run."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from campaign_kit import latest_statuses, small_campaign

from mkbsim.campaigns import _plan, plan_campaign, run_simulated
from mkbsim.errors import UserError
from mkbsim.events import AttemptFinished, EventStore, NewEvent, attempt_stream
from mkbsim.simulator import run_campaign


def _attempt_payloads(path: Path) -> list[tuple[str, str, str]]:
    conn = sqlite3.connect(path)
    sql = "SELECT stream_id, type, payload FROM events WHERE stream_id LIKE 'attempt-%' ORDER BY position"
    out = [(s, t, p) for s, t, p in conn.execute(sql)]
    conn.close()
    return out


def test_a_campaign_run_records_the_simulators_exact_events(tmp_path: Path) -> None:
    campaign = small_campaign()
    with EventStore(tmp_path / "runner.sqlite", create=True) as store:
        result = run_simulated(store, campaign)
    with EventStore(tmp_path / "simulator.sqlite", create=True) as store:
        run_campaign(store, campaign.sim)
    assert result.ran == result.attempts == 16 and result.kept == 0
    runner, simulator = (sorted(_attempt_payloads(tmp_path / f"{n}.sqlite")) for n in ("runner", "simulator"))
    assert runner == simulator


def test_an_infra_error_try_runs_again_and_a_finished_campaign_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "e.sqlite"
    campaign = small_campaign()
    with EventStore(path, create=True) as store:
        run_simulated(store, campaign)
        first = _attempt_payloads(path)
        treatment = next(a for a in plan_campaign(campaign).attempts if a.arm == "tirx2cutedsl_skill")
        stream = attempt_stream(treatment.attempt_id)
        start = next(e for e in store.read_stream(stream) if e.type == "AttemptStarted")
        store.append([NewEvent(stream, start.type, start.payload), NewEvent.of(stream, AttemptFinished(
            attempt_id=treatment.attempt_id, status="infra_error", passed=False, runtime_ms=None, speedup=None,
            skipped=False, reason="verifier machine lost"))])  # fmt: skip
        again = run_simulated(store, campaign)
        assert (again.ran, again.kept) == (1, 15)
        assert run_simulated(store, campaign).already_finished
    assert set(latest_statuses(path).values()) == {"finished"}
    retried = _attempt_payloads(path)[len(first) + 2 :]
    assert retried == [e for e in first if e[0] == stream]  # the retry is the same attempt, event for event


def test_a_changed_fingerprint_is_refused_with_the_reason_unless_a_new_campaign_is_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    campaign = small_campaign()
    with EventStore(tmp_path / "e.sqlite", create=True) as store:
        first = run_simulated(store, campaign)
        real = _plan.fingerprint_parts
        monkeypatch.setattr(_plan, "fingerprint_parts", lambda c: {**real(c), "problem_definitions": "edited"})
        with pytest.raises(UserError, match=r"problem definitions changed.*--new-campaign"):
            run_simulated(store, campaign)
        fresh = run_simulated(store, campaign, new_campaign=True)
    assert fresh.campaign_id.startswith(first.campaign_id + "-") and fresh.ran == fresh.attempts == 16
