"""Helpers for campaign tests: a small simulated campaign, `mkbsim` subprocesses, and store checks."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

from mkbsim.campaigns import SimCampaign
from mkbsim.simulator import CampaignConfig, get_profile, select_problems

# one problem of each family or two, with six profiles: 288 attempts (~9,000 events), a run of a few flushes
# (5,000 events or 0.25 s each) that a kill can land between
PROBLEMS = "p01,p04,p19,p23,p28,p33,p45,p49,p52,p58,p62,p72"
PROFILES = ("sim-gpt-5.6-sol", "sim-glm-5.3")


def small_campaign(seed: int = 3, problems: str = "p28,p36") -> SimCampaign:
    config = CampaignConfig(tuple(get_profile(p) for p in PROFILES), tuple(select_problems(problems)), seed=seed)
    return SimCampaign(config, workers=2)


ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


def run_argv(store: Path, seed: int) -> list[str]:
    return ["run", "--store", str(store), "--problems", PROBLEMS, "--seed", str(seed), "--workers", "2"]


def start(*argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "mkbsim", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=ENV)  # fmt: skip


def mkbsim(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkbsim", *argv], capture_output=True, text=True, env=ENV, timeout=120)


def finished_count(store: Path) -> int:
    """AttemptFinished events in the store so far (0 while it does not exist yet)."""
    if not store.exists():
        return 0
    conn = sqlite3.connect(store, timeout=10)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM events WHERE type = 'AttemptFinished'").fetchone()[0])
    except sqlite3.OperationalError:  # the table is being created
        return 0
    finally:
        conn.close()


def report_json(store: Path) -> dict[str, object]:
    done = mkbsim("report", "--store", str(store), "--format", "json")
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def attempt_tries(store: Path) -> tuple[Counter[str], Counter[tuple[str, str]]]:
    """AttemptStarted count per attempt, and AttemptFinished count per (attempt, status)."""
    conn = sqlite3.connect(store)
    rows = conn.execute("SELECT type, payload FROM events WHERE type IN ('AttemptStarted', 'AttemptFinished')")
    starts: Counter[str] = Counter()
    finishes: Counter[tuple[str, str]] = Counter()
    for type_, payload in rows:
        p = json.loads(payload)
        if type_ == "AttemptStarted":
            starts[p["attempt_id"]] += 1
        else:
            finishes[(p["attempt_id"], p["status"])] += 1
    conn.close()
    return starts, finishes


def latest_statuses(store: Path) -> dict[str, str]:
    conn = sqlite3.connect(store)
    rows = conn.execute("SELECT payload FROM events WHERE type = 'AttemptFinished' ORDER BY position")
    latest = {p["attempt_id"]: p["status"] for p in (json.loads(r[0]) for r in rows)}
    conn.close()
    return latest
