"""The monitor's queries: campaigns, progress per model and arm, attempts in flight, throughput, failures.

Campaigns come from the `campaigns` projection, progress from the `attempts` projection; times are the
events' ``recorded_at`` (UTC, written at append), so throughput and ETA describe the store as it grows,
whoever writes it.
"""

from __future__ import annotations

import json
from dataclasses import astuple, dataclass
from datetime import datetime, timedelta
from typing import Any

from mkbsim.lab._reader import Queries
from mkbsim.metrics import DIRECTIONS, arm_kind
from mkbsim.metrics._rules import ARM_KINDS

#: The transfer protocol's arms in its order (DESIGN §4); campaigns may use a subset, and add control arms.
ARM_ORDER = ("solo_cutedsl", "solo_tirx", "cutedsl2tirx_skill", "tirx2cutedsl_skill")
#: campaign kinds that run only treatments (a filter test re-runs another campaign's)
_TREATMENT_ONLY_KINDS = frozenset({"treatment_rerun"})


def arm_rank(arm: str) -> tuple[int, str, int]:
    """Sorts arms in the protocol's order: solos, then per direction the treatment and its control arms."""
    if arm in ARM_ORDER[:2]:
        return (0, "", ARM_ORDER.index(arm))
    known = arm_kind(arm)
    if known is None:
        return (2, arm, 0)
    return (1, known[0], ARM_KINDS.index(known[1]))


@dataclass(frozen=True)
class CampaignPlan:
    """What a campaign's config says it will run, where the config says it."""

    models: tuple[str, ...]
    #: (arm, attempts planned per model) in the protocol's order; empty where the config does not say
    per_model: tuple[tuple[str, int], ...]

    @property
    def arms(self) -> tuple[str, ...]:
        return tuple(arm for arm, _ in self.per_model)

    def planned(self, arm: str) -> int | None:
        return dict(self.per_model).get(arm)

    @property
    def total(self) -> int | None:
        if not self.per_model or not self.models:
            return None
        return sum(n for _, n in self.per_model) * len(self.models)


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
    skipped: int
    infra: int  # infra_error or interrupted: run again on resume
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
class FailedAttempt:
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
    """The plan a campaign config states: its models, and per model how many attempts of each arm. Per problem
    and replicate, a campaign plans both solos and, per direction, the treatment and each control arm asked
    for; a filter test plans only treatments; a chain of K hops plans K skill-conditioned hops from each
    starting DSL, alternating directions (each direction's arm gets K of them)."""
    agents = config.get("profiles") or config.get("models") or config.get("agents") or ()
    if isinstance(agents, list | tuple):  # an LLM campaign file's [[agents]] tables: their labels
        agents = [a.get("name") or a.get("model") if isinstance(a, dict) else a for a in agents]
    models = tuple(sorted(agents)) if isinstance(agents, dict | list | tuple) else ()
    problems, replicates = config.get("problems"), config.get("replicates", 1)
    if not isinstance(problems, list) or not isinstance(replicates, int):
        return CampaignPlan(models, ())
    cells = len(problems) * replicates
    directions = [d for d in config.get("directions") or DIRECTIONS if d in DIRECTIONS]
    named = config.get("arms")
    if isinstance(named, list | tuple) and named:
        counts = dict.fromkeys(named, cells)
    elif config.get("kind") in _TREATMENT_ONLY_KINDS:
        counts = {f"{d}_skill": cells for d in directions}
    elif isinstance(config.get("hops"), int):  # a chain: each direction's arm holds K hops per problem
        counts = dict.fromkeys(ARM_ORDER[:2], cells) | {f"{d}_skill": cells * config["hops"] for d in DIRECTIONS}
    else:
        controls = [c for c in config.get("controls") or () if c in ARM_KINDS]
        counts = dict.fromkeys(ARM_ORDER[:2], cells) | {
            f"{d}_{kind}": cells for d in directions for kind in ("skill", *controls)
        }  # fmt: skip
    return CampaignPlan(models, tuple(sorted(counts.items(), key=lambda item: arm_rank(item[0]))))


def arm_progress(campaign: CampaignInfo, grid: CountGrid) -> list[ArmProgress]:
    """One row per (model, arm) the plan names or the store holds, in model then protocol order."""
    seen = {(model, arm): c for (cid, model, arm), c in grid.items() if cid == campaign.campaign_id}
    models = sorted(set(campaign.plan.models) | {m for m, _ in seen})
    arms = sorted(set(campaign.plan.arms) | {a for _, a in seen}, key=arm_rank)
    rows = []
    for model in models:
        for arm in arms:
            c = seen.get((model, arm), Counts())
            planned = campaign.plan.planned(arm) if model in campaign.plan.models else None
            rows.append(ArmProgress(model, arm, c.attempts - c.running, c.running, c.passed, c.skipped, c.infra,
                                    planned))  # fmt: skip
    return rows


class MonitorQueries(Queries):
    def attempt_counts(self) -> CountGrid:
        """Every (campaign, model, arm) cell's counts, in one scan of the `attempts` projection."""
        grid: CountGrid = {}
        for campaign, model, arm, n, running, passed, failed, infra, skipped in self._all(
            "SELECT campaign_id, model, arm, COUNT(*), SUM(status = 'running'),"
            " SUM(status = 'finished' AND passed = 1),"
            " SUM(status = 'finished' AND passed = 0 AND NOT COALESCE(skipped, 0)),"
            " SUM(status IN ('infra_error', 'interrupted')), SUM(status = 'finished' AND COALESCE(skipped, 0))"
            f" FROM {self.t.attempts} GROUP BY campaign_id, model, arm"
        ):
            grid[(campaign, model, arm)] = Counts(n, running or 0, passed or 0, failed or 0, infra or 0, skipped or 0)
        return grid

    def campaigns(self, grid: CountGrid) -> list[CampaignInfo]:
        """Every campaign, newest first: those announced by CampaignStarted and any others with attempts."""
        started = {
            cid: (kind, json.loads(config), position, parse_time(at), parse_time(done) if done else None)
            for cid, kind, config, position, at, done in self._all(
                f"SELECT campaign_id, kind, config, started_position, started_at, finished_at FROM {self.t.campaigns}"
            )
        }
        totals: dict[str, Counts] = {}
        for (campaign, _, _), counts in grid.items():
            totals[campaign] = totals.get(campaign, Counts()) + counts
        out = []
        for cid in started.keys() | totals.keys():
            kind, config, position, started_at, finished_at = started.get(cid, ("unknown", {}, None, None, None))
            out.append(CampaignInfo(cid, kind, position, started_at, finished_at, plan_of(config),
                                    totals.get(cid, Counts())))  # fmt: skip
        # newest first; campaigns without a CampaignStarted event (older tools) last, by name
        return sorted(out, key=lambda c: (c.started_position is None, -(c.started_position or 0), c.campaign_id))

    def in_flight(self, campaign_id: str, limit: int) -> list[InFlight]:
        """The oldest running attempts (up to ``limit``) with their submissions and latest agent step."""
        out = []
        for attempt_id, model, problem, arm, submissions, started_at, submission_limit in self._all(
            "SELECT attempt_id, model, problem, arm, submissions, started_at, submission_limit"
            f" FROM {self.t.attempts} WHERE campaign_id = ? AND status = 'running' ORDER BY started_position LIMIT ?",
            [campaign_id, limit],
        ):
            step = self._latest(attempt_id, "AgentStep")
            out.append(
                InFlight(
                    attempt_id=attempt_id, model=model, problem=problem, arm=arm,
                    started_at=parse_time(started_at), submissions=int(submissions),
                    submission_limit=submission_limit,
                    agent_clock_s=float(step.payload["elapsed_s"]) if step else None,
                    last_step=step.payload["kind"] if step else None,
                )
            )  # fmt: skip
        return out

    def recent_failures(self, campaign_id: str, limit: int) -> list[FailedAttempt]:
        """The latest attempts that finished without passing (skipped treatments are not failures), with the
        last verifier result's failure name where the attempt's own finish gives no reason."""
        out = []
        for attempt_id, model, problem, arm, status, reason in self._all(
            f"SELECT attempt_id, model, problem, arm, status, reason FROM {self.t.attempts} WHERE campaign_id = ?"
            " AND status != 'running' AND (status != 'finished' OR (passed = 0 AND NOT COALESCE(skipped, 0)))"
            " ORDER BY finished_position DESC LIMIT ?",
            [campaign_id, limit],
        ):
            if reason is None:
                verdict = self._latest(attempt_id, "VerifierResult")
                reason = verdict.payload.get("failure") if verdict else None
            out.append(FailedAttempt(attempt_id, model, problem, arm, status, reason))
        return out

    def throughput(self, campaign: CampaignInfo, now: datetime, window: timedelta) -> Throughput:
        """Finish rate of a running campaign over the last ``window`` and the ETA it implies."""
        if campaign.started_at is None:
            return Throughput(None, window, None)
        since = max(now - window, campaign.started_at)
        row = self._one(
            f"SELECT COUNT(*) FROM {self.t.attempts} WHERE campaign_id = ? AND finished_position >= ?",
            [campaign.campaign_id, self.first_position_at(since)],
        )
        finished = int(row[0]) if row else 0
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

    def first_position_at(self, when: datetime) -> int:
        """The first position recorded at or after ``when`` (head + 1 if none): a binary search over positions,
        whose ``recorded_at`` grows with them, so it costs a few primary-key lookups on any store size."""
        lo, hi = 1, self.store.last_position() + 1
        while lo < hi:
            mid = (lo + hi) // 2
            row = self._one("SELECT recorded_at FROM events WHERE position = ?", [mid])
            if row is not None and parse_time(row[0]) < when:
                lo = mid + 1
            else:
                hi = mid
        return lo
