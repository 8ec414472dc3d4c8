"""The monitor's reads: campaigns, progress per model and arm, attempts in flight, throughput, failures.

Progress comes from the `attempts` projection; times come from the events' ``recorded_at`` (UTC,
written at append), so throughput and ETA describe the store as it grows, whoever writes it.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import astuple, dataclass
from datetime import datetime, timedelta
from typing import Any

from mkbsim.metrics import direction_of_arm

#: Arms in the protocol's order (DESIGN §4); campaigns may use a subset.
ARM_ORDER = ("solo_cutedsl", "solo_tirx", "cutedsl2tirx_skill", "tirx2cutedsl_skill")
_TREATMENT_ONLY_KINDS = frozenset({"treatment_rerun"})


@dataclass(frozen=True)
class CampaignPlan:
    """What a campaign's config says it will run, where the config says it (None: not stated)."""

    models: tuple[str, ...]
    arms: tuple[str, ...]
    per_model_arm: int | None

    @property
    def total(self) -> int | None:
        if self.per_model_arm is None or not self.models:
            return None
        return self.per_model_arm * len(self.models) * len(self.arms)


@dataclass(frozen=True)
class Counts:
    """Attempts by state: one cell of the (campaign, model, arm) grid, or a sum of cells."""

    attempts: int = 0
    running: int = 0
    passed: int = 0
    failed: int = 0  # finished without passing, skipped treatments excepted
    infra: int = 0  # infra_error or interrupted
    skipped: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))


#: (campaign, model, arm) → its attempts' counts
CountGrid = dict[tuple[str, str, str], Counts]


@dataclass(frozen=True)
class CampaignInfo:
    campaign_id: str
    kind: str
    started_position: int | None
    started_at: datetime | None
    finished_at: datetime | None
    plan: CampaignPlan
    counts: Counts

    @property
    def attempts(self) -> int:
        return self.counts.attempts

    @property
    def running(self) -> int:
        return self.counts.running

    @property
    def done(self) -> int:
        return self.counts.attempts - self.counts.running

    @property
    def finished(self) -> bool:
        return self.finished_at is not None


@dataclass(frozen=True)
class ArmProgress:
    model: str
    arm: str
    done: int
    running: int
    passed: int
    planned: int | None


@dataclass(frozen=True)
class InFlight:
    attempt_id: str
    model: str
    problem: str
    arm: str
    started_at: datetime | None
    submissions: int
    submission_limit: int | None
    agent_clock_s: float | None
    last_step: str | None


@dataclass(frozen=True)
class Failure:
    attempt_id: str
    model: str
    problem: str
    arm: str
    status: str
    reason: str | None


@dataclass(frozen=True)
class Throughput:
    """Attempts finished per minute over the last ``window``, or since the campaign started when that is
    sooner or nothing finished within the window (then ``since_start``)."""

    per_minute: float | None
    window: timedelta
    eta: timedelta | None
    since_start: bool = False


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def plan_of(config: dict[str, Any]) -> CampaignPlan:
    """The plan a campaign config states: models, arms, attempts per (model, arm)."""
    agents = config.get("profiles") or config.get("models") or config.get("agents") or ()
    if isinstance(agents, list | tuple):  # an LLM campaign file's [[agents]] tables: their labels
        agents = [a.get("name") or a.get("model") if isinstance(a, dict) else a for a in agents]
    models = tuple(sorted(agents)) if isinstance(agents, dict | list | tuple) else ()
    arms_named = config.get("arms")
    if isinstance(arms_named, list | tuple) and arms_named:
        arms = tuple(a for a in ARM_ORDER if a in arms_named) or tuple(arms_named)
    elif config.get("kind") in _TREATMENT_ONLY_KINDS:
        arms = tuple(a for a in ARM_ORDER if direction_of_arm(a))
    else:
        arms = ARM_ORDER
    problems = config.get("problems")
    replicates = config.get("replicates", 1)
    per_cell = len(problems) * replicates if isinstance(problems, list) and isinstance(replicates, int) else None
    return CampaignPlan(models, arms, per_cell)


def attempt_counts(conn: sqlite3.Connection) -> CountGrid:
    """Every (campaign, model, arm) cell's counts, in one scan of the `attempts` projection."""
    grid: CountGrid = {}
    if not _has_attempts(conn):
        return grid
    for campaign, model, arm, n, running, passed, failed, infra, skipped in conn.execute(
        "SELECT campaign_id, model, arm, COUNT(*), SUM(status = 'running'), SUM(status = 'finished' AND passed = 1),"
        " SUM(status = 'finished' AND passed = 0 AND NOT COALESCE(skipped, 0)),"
        " SUM(status IN ('infra_error', 'interrupted')), SUM(status = 'finished' AND COALESCE(skipped, 0))"
        " FROM attempts GROUP BY campaign_id, model, arm"
    ):
        grid[(campaign, model, arm)] = Counts(n, running or 0, passed or 0, failed or 0, infra or 0, skipped or 0)
    return grid


def campaigns(conn: sqlite3.Connection, grid: CountGrid) -> list[CampaignInfo]:
    """Every campaign, newest first: those announced by CampaignStarted and any others with attempts."""
    started: dict[str, tuple[int, str, dict[str, Any]]] = {}
    for position, recorded_at, payload in conn.execute(
        "SELECT position, recorded_at, payload FROM events WHERE type = 'CampaignStarted' ORDER BY position"
    ):
        body = json.loads(payload)
        started[body["campaign_id"]] = (position, recorded_at, body.get("config") or {})
    finished = {
        json.loads(payload)["campaign_id"]: recorded_at
        for recorded_at, payload in conn.execute(
            "SELECT recorded_at, payload FROM events WHERE type = 'CampaignFinished' ORDER BY position"
        )
    }
    totals: dict[str, Counts] = {}
    for (campaign, _, _), counts in grid.items():
        totals[campaign] = totals.get(campaign, Counts()) + counts
    out = []
    for cid in started.keys() | totals.keys():
        position, recorded_at, config = started.get(cid, (None, None, {}))
        out.append(
            CampaignInfo(
                campaign_id=cid, kind=str(config.get("kind", "unknown")), started_position=position,
                started_at=parse_time(recorded_at) if recorded_at else None,
                finished_at=parse_time(finished[cid]) if cid in finished else None,
                plan=plan_of(config), counts=totals.get(cid, Counts()),
            )
        )  # fmt: skip
    # newest first; campaigns without a CampaignStarted event (older tools) last, by name
    return sorted(out, key=lambda c: (c.started_position is None, -(c.started_position or 0), c.campaign_id))


def arm_progress(campaign: CampaignInfo, grid: CountGrid) -> list[ArmProgress]:
    """One row per (model, arm) the plan names or the store holds, in model then protocol order."""
    seen = {(model, arm): c for (cid, model, arm), c in grid.items() if cid == campaign.campaign_id}
    models = sorted(set(campaign.plan.models) | {m for m, _ in seen})
    arms = [a for a in ARM_ORDER if a in campaign.plan.arms or any(k[1] == a for k in seen)]
    arms += sorted({a for _, a in seen} - set(arms))
    rows = []
    for model in models:
        for arm in arms:
            c = seen.get((model, arm), Counts())
            planned = campaign.plan.per_model_arm if model in campaign.plan.models else None
            rows.append(ArmProgress(model, arm, c.attempts - c.running, c.running, c.passed, planned))
    return rows


def in_flight(conn: sqlite3.Connection, campaign_id: str, limit: int) -> list[InFlight]:
    """The oldest running attempts (up to ``limit``) with their submissions and latest agent step."""
    if not _has_attempts(conn):
        return []
    out = []
    for attempt_id, model, problem, arm, submissions, started_position in conn.execute(
        "SELECT attempt_id, model, problem, arm, submissions, started_position FROM attempts"
        " WHERE campaign_id = ? AND status = 'running' ORDER BY started_position LIMIT ?",
        (campaign_id, limit),
    ):
        started = conn.execute("SELECT recorded_at, payload FROM events WHERE position = ?", (started_position,))
        row = started.fetchone()
        budget = (json.loads(row[1]).get("budget") or {}) if row else {}
        step = conn.execute(
            "SELECT payload FROM events WHERE stream_id = ? AND type = 'AgentStep' ORDER BY version DESC LIMIT 1",
            (f"attempt-{attempt_id}",),
        ).fetchone()
        last = json.loads(step[0]) if step else None
        limit_value = budget.get("submissions")
        out.append(
            InFlight(
                attempt_id=attempt_id, model=model, problem=problem, arm=arm,
                started_at=parse_time(row[0]) if row else None, submissions=int(submissions),
                submission_limit=int(limit_value) if isinstance(limit_value, int) else None,
                agent_clock_s=float(last["elapsed_s"]) if last else None, last_step=last["kind"] if last else None,
            )
        )  # fmt: skip
    return out


def recent_failures(conn: sqlite3.Connection, campaign_id: str, limit: int) -> list[Failure]:
    """The latest attempts that finished without passing (skipped treatments are not failures), with the
    final verifier's failure name where the attempt's own finish gives no reason."""
    if not _has_attempts(conn):
        return []
    out = []
    for attempt_id, model, problem, arm, status, reason in conn.execute(
        "SELECT attempt_id, model, problem, arm, status, reason FROM attempts WHERE campaign_id = ?"
        " AND status != 'running' AND (status != 'finished' OR (passed = 0 AND NOT COALESCE(skipped, 0)))"
        " ORDER BY finished_position DESC LIMIT ?",
        (campaign_id, limit),
    ):
        if reason is None:
            verdict = conn.execute(
                "SELECT payload FROM events WHERE stream_id = ? AND type = 'VerifierResult'"
                " ORDER BY version DESC LIMIT 1",
                (f"attempt-{attempt_id}",),
            ).fetchone()
            reason = json.loads(verdict[0]).get("failure") if verdict else None
        out.append(Failure(attempt_id, model, problem, arm, status, reason))
    return out


def throughput(conn: sqlite3.Connection, campaign: CampaignInfo, now: datetime, window: timedelta) -> Throughput:
    """Finish rate of a running campaign over the last ``window`` and the ETA it implies."""
    if not _has_attempts(conn) or campaign.started_at is None:
        return Throughput(None, window, None)
    since = max(now - window, campaign.started_at)
    finished = conn.execute(
        "SELECT COUNT(*) FROM attempts WHERE campaign_id = ? AND finished_position >= ?",
        (campaign.campaign_id, first_position_at(conn, since)),
    ).fetchone()[0]
    since_start = since == campaign.started_at or not finished
    if since_start:  # a stalled campaign is judged by its whole run, not by an empty window
        since, finished = campaign.started_at, campaign.done
    span = now - since
    if span.total_seconds() <= 0:
        return Throughput(None, window, None)
    per_minute = finished / (span.total_seconds() / 60.0)
    eta = None
    total = campaign.plan.total
    if total is not None and per_minute > 0:
        eta = timedelta(minutes=max(0, total - campaign.done) / per_minute)
    return Throughput(per_minute, span, eta, since_start)


def first_position_at(conn: sqlite3.Connection, when: datetime) -> int:
    """The first position recorded at or after ``when`` (head + 1 if none): a binary search over positions,
    whose ``recorded_at`` grows with them, so it costs a few primary-key lookups on any store size."""
    head = conn.execute("SELECT COALESCE(MAX(position), 0) FROM events").fetchone()[0]
    lo, hi = 1, head + 1
    while lo < hi:
        mid = (lo + hi) // 2
        row = conn.execute("SELECT recorded_at FROM events WHERE position = ?", (mid,)).fetchone()
        if row is not None and parse_time(row[0]) < when:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _has_attempts(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'attempts'").fetchone()
    return row is not None
