"""Resuming in process: retried tries, refused plan changes, the same events as the simulator's own run."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from campaign_kit import latest_statuses, small_campaign

from mkbsim.campaigns import _simulated, run_campaign
from mkbsim.errors import UserError
from mkbsim.events import AttemptFinished, EventStore, NewEvent, attempt_stream
from mkbsim.simulator import simulate


def _attempt_payloads(path: Path) -> list[tuple[str, str, str]]:
    conn = sqlite3.connect(path)
    sql = "SELECT stream_id, type, payload FROM events WHERE stream_id LIKE 'attempt-%' ORDER BY position"
    out = [(s, t, p) for s, t, p in conn.execute(sql)]
    conn.close()
    return out


def test_a_campaign_run_records_the_simulators_exact_events(tmp_path: Path) -> None:
    campaign = small_campaign()
    with EventStore(tmp_path / "runner.sqlite", create=True) as store:
        result = run_campaign(store, campaign)
    assert result.ran == result.attempts == 16 and result.kept == 0
    runner = sorted((s, t, json.dumps(json.loads(p), sort_keys=True)) for s, t, p in _attempt_payloads(
        tmp_path / "runner.sqlite"))  # fmt: skip
    simulated = sorted((e.stream_id, e.type, json.dumps(e.payload, sort_keys=True)) for _, outcome in
                       simulate(campaign) for e in outcome.events)  # fmt: skip
    assert runner == simulated


def test_an_infra_error_try_runs_again_and_a_finished_campaign_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "e.sqlite"
    campaign = small_campaign()
    with EventStore(path, create=True) as store:
        run_campaign(store, campaign)
        first = _attempt_payloads(path)
        treatment = next(a for a in campaign.plan().attempts if a.arm == "tirx2cutedsl_skill")
        stream = attempt_stream(treatment.attempt_id)
        start = next(e for e in store.read_stream(stream) if e.type == "AttemptStarted")
        store.append([NewEvent(stream, start.type, start.payload), NewEvent.of(stream, AttemptFinished(
            attempt_id=treatment.attempt_id, status="infra_error", passed=False, runtime_ms=None, speedup=None,
            skipped=False, reason="verifier machine lost"))])  # fmt: skip
        again = run_campaign(store, campaign)
        assert (again.ran, again.kept) == (1, 15)
        assert run_campaign(store, campaign).already_finished
    assert set(latest_statuses(path).values()) == {"finished"}
    retried = _attempt_payloads(path)[len(first) + 2 :]
    assert retried == [e for e in first if e[0] == stream]  # the retry is the same attempt, event for event


def test_a_changed_fingerprint_is_refused_with_the_reason_unless_a_new_campaign_is_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    campaign = small_campaign()
    with EventStore(tmp_path / "e.sqlite", create=True) as store:
        first = run_campaign(store, campaign)
        real = _simulated.fingerprint_parts
        monkeypatch.setattr(_simulated, "fingerprint_parts", lambda *a: {**real(*a), "problem_definitions": "edited"})
        with pytest.raises(UserError, match=r"problem definitions changed.*--new-campaign"):
            run_campaign(store, campaign)
        fresh = run_campaign(store, campaign, new_campaign=True)
    assert fresh.campaign_id.startswith(first.campaign_id + "-") and fresh.ran == fresh.attempts == 16
