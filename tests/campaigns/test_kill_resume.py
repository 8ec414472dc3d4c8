"""Reliability: a real `mkbsim run` killed (SIGKILL) or stopped (SIGINT/SIGTERM) mid-campaign, then
resumed by the same command, ends with every attempt finished exactly once and the report of an
uninterrupted run with the same seed."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from campaign_kit import (
    PROBLEMS,
    attempt_tries,
    finished_count,
    latest_statuses,
    mkbsim,
    report_json,
    run_argv,
    start,
)

from mkbsim.simulator import select_problems, shipped_profiles

ATTEMPTS = len(select_problems(PROBLEMS)) * len(shipped_profiles()) * 4

pytestmark = pytest.mark.slow


SEED = 1  # the campaign every test runs: kill points and signals vary, its uninterrupted report is shared


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The report of an uninterrupted run."""
    store = tmp_path_factory.mktemp("ref") / "events.sqlite"
    done = mkbsim(*run_argv(store, SEED))
    assert done.returncode == 0, done.stderr
    return report_json(store)


def _wait_for_attempts(proc: subprocess.Popen[str], store: Path, at_least: int = 1) -> None:
    deadline = time.monotonic() + 60
    while finished_count(store) < at_least and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)


def _processes_naming(store: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and str(store).encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:  # gone meanwhile
            pass
    return found


def _assert_no_process_left(store: Path) -> None:
    deadline = time.monotonic() + 10
    while _processes_naming(store) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _processes_naming(store)


def _assert_resumed_completely(store: Path, report: dict[str, object]) -> None:
    done = mkbsim(*run_argv(store, SEED))
    assert done.returncode == 0, done.stderr
    statuses = latest_statuses(store)
    assert len(statuses) == ATTEMPTS and set(statuses.values()) == {"finished"}
    _, finishes = attempt_tries(store)
    assert all(finishes[(a, "finished")] == 1 for a in statuses)  # every attempt finished exactly once
    check = mkbsim("events", "check", "--store", str(store))
    assert check.returncode == 0 and check.stdout.startswith("ok"), check.stdout + check.stderr
    assert report_json(store) == report


# one kill is the two-kill case's first half: the ordinary run keeps the second (README "Tests")
@pytest.mark.parametrize("kills", [pytest.param(1, marks=pytest.mark.thorough), 2])
def test_a_campaign_killed_at_random_points_resumes_to_the_uninterrupted_report(
    tmp_path: Path, kills: int, reference: dict[str, object]
) -> None:
    rng = random.Random(kills)  # two draws of kill points
    store = tmp_path / "events.sqlite"
    partial = []
    for _ in range(2):  # killed once the store holds a random number more of finished attempts
        proc = start(*run_argv(store, SEED))
        _wait_for_attempts(proc, store, finished_count(store) + rng.randint(1, ATTEMPTS // 3))
        proc.kill()
        proc.wait()
        _assert_no_process_left(store)  # its pool workers die with it
        partial.append(finished_count(store))
    assert partial[0] < ATTEMPTS  # the first kill landed mid-campaign
    starts, _ = attempt_tries(store)
    assert set(starts.values()) <= {1}  # SIGKILL never leaves half an attempt: nothing to close
    _assert_resumed_completely(store, reference)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_cleanly_and_records_in_flight_attempts_as_interrupted(
    tmp_path: Path, signum: signal.Signals, code: int, reference: dict[str, object]
) -> None:
    store = tmp_path / "events.sqlite"
    proc = start(*run_argv(store, SEED))
    _wait_for_attempts(proc, store)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    statuses = latest_statuses(store)
    assert "interrupted" in statuses.values() and len(statuses) < ATTEMPTS
    starts, _ = attempt_tries(store)
    assert set(starts) == set(statuses)  # every try that started has recorded its end
    _assert_resumed_completely(store, reference)
