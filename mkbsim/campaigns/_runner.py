"""Running (or resuming) a simulated campaign on an executor.

The campaign id derives from the configuration and seed, every attempt id from the campaign id and
the attempt's place, so running the same campaign again continues it: attempts whose latest try
finished are kept, the others (``infra_error``, ``interrupted``, never recorded) run again under
their id. A changed plan fingerprint is refused unless a new campaign is asked for. Each attempt's
events are appended together, in batches, so a killed run never leaves half an attempt behind;
SIGINT/SIGTERM stop cleanly and record the attempts then in flight as ``interrupted``.
"""

from __future__ import annotations

import gc
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mkbsim.campaigns._config import SimCampaign
from mkbsim.campaigns._executors import Executor, LocalExecutor, RayExecutor
from mkbsim.campaigns._plan import Plan, PlannedAttempt, plan_campaign
from mkbsim.campaigns._progress import Progress
from mkbsim.campaigns._signals import StopSignals
from mkbsim.errors import UserError
from mkbsim.events import (
    AttemptFinished,
    CampaignFinished,
    CampaignStarted,
    EventStore,
    NewEvent,
    attempt_stream,
    campaign_stream,
)
from mkbsim.simulator import AttemptSpec, SourceSkill, attempt_spec, simulate_attempt, skill_of_events, started_event

BATCH_EVENTS = 5000  # events per store transaction at most
FLUSH_S = 0.25  # and at least this often while attempts finish
POLL_S = 0.05
MAX_CHUNK = 16  # attempts per task at most


@dataclass
class RunResult:
    campaign_id: str
    attempts: int  # in the plan
    ran: int = 0  # attempts run (to their end) by this run
    kept: int = 0  # attempts finished by earlier runs
    events: int = 0  # events appended by this run
    append_s: float = 0.0  # seconds the store spent appending them (in the writer)
    append_cpu_s: float = 0.0  # the writer's CPU seconds for them (what contention for cores leaves out)
    interrupted: int = 0  # attempts in flight when a signal stopped the run
    stopped_by: str | None = None  # the signal's name
    already_finished: bool = False
    counts: dict[str, Any] = field(default_factory=dict)


def simulate_events(specs: list[AttemptSpec]) -> list[list[NewEvent]]:
    """The unit of work an executor runs: simulated attempts, each with all its events."""
    return [simulate_attempt(spec).events for spec in specs]


def make_executor(kind: str, workers: int, store: EventStore, ray_address: str | None) -> Executor:
    if kind == "ray":
        return RayExecutor(simulate_events, workers, ray_address, str(store.path))
    if ray_address is not None:
        raise UserError("--ray-address needs --executor ray")
    return LocalExecutor(simulate_events, workers)


def run_simulated(
    store: EventStore,
    campaign: SimCampaign,
    *,
    executor: str = "local",
    ray_address: str | None = None,
    new_campaign: bool = False,
    progress: bool = False,
    skill_filter: Callable[[str], str] | None = None,
) -> RunResult:
    """Run ``campaign`` into ``store``, or continue it there; ``new_campaign`` starts a separate campaign
    (its id suffixed with the new fingerprint) where the stored one was planned differently.

    A campaign with ``filter`` needs ``skill_filter``, the named filter's text transform (the caller
    resolves the name: `mkbsim run` through ``skill_filters``): every treatment reads its source's skill
    through it. Chains (``chain``) are a different protocol, run by ``mkbsim.simulator.run_chains``."""
    if campaign.chain is not None:
        raise UserError("campaign.chain: chains run with `mkbsim run` from the CLI or mkbsim.simulator.run_chains")
    if (campaign.filter is None) != (skill_filter is None):
        raise UserError(f"campaign.filter is {campaign.filter!r} but a skill filter was "
                        f"{'not ' if skill_filter is None else ''}given")  # fmt: skip
    plan = plan_campaign(campaign)
    started = _started(store, plan.campaign_id)
    if started is not None and started["plan_fingerprint"] != plan.fingerprint:
        if not new_campaign:
            raise UserError(_changed(plan, started, str(store.path)))
        plan = plan_campaign(campaign, f"{plan.campaign_id}-{plan.fingerprint[:8]}")
        started = _started(store, plan.campaign_id)
    if started is None:
        from mkbsim import __version__

        payload = CampaignStarted(campaign_id=plan.campaign_id, config=campaign.normalized(),
                                  plan_fingerprint=plan.fingerprint, code_version=f"mkbsim {__version__}")  # fmt: skip
        event = NewEvent.of(campaign_stream(plan.campaign_id), payload)
        event.payload.update(fingerprint_parts=plan.parts, attempts=len(plan.attempts))
        store.append([event], expected_version=0)
    run = _Run(store, campaign, plan, skill_filter)
    if run.result.kept == len(plan.attempts) and _has_finished(store, plan.campaign_id):
        run.result.already_finished = True
        return run.result
    ex = make_executor(executor, campaign.limits.agents, store, ray_address)
    # what is loaded by now (catalogue, design spaces, modules) needs no cycle collection: without it the
    # collector rescans all of it during the appends, which then run well below the store's own rate
    gc.freeze()
    try:
        with Progress(plan.count_by_arm(), f"campaign {plan.campaign_id}", progress) as bars, StopSignals() as signals:
            run.execute(ex, bars, signals)
    finally:
        gc.unfreeze()
        ex.close()
    return run.result


class _Run:
    def __init__(
        self, store: EventStore, campaign: SimCampaign, plan: Plan, skill_filter: Callable[[str], str] | None
    ) -> None:
        self.store, self.campaign, self.plan, self.skill_filter = store, campaign, plan, skill_filter
        self.result = RunResult(plan.campaign_id, len(plan.attempts))
        self.profiles = {p.name: p for p in campaign.sim.profiles}
        self.by_id = {a.attempt_id: a for a in plan.attempts}
        # attempt id -> the outcome of its latest try, for attempts whose latest try finished
        self.finished = {pid: _Outcome.of(events) for pid, events in _finished_tries(store, set(self.by_id)).items()}
        self.result.kept = len(self.finished)
        self.buffer: list[NewEvent] = []
        self.last_flush = time.monotonic()

    def execute(self, ex: Executor, bars: Progress, signals: StopSignals) -> None:
        for pid, outcome in self.finished.items():
            bars.done(self.by_id[pid].arm, outcome.passed)
        dependents: dict[str, list[PlannedAttempt]] = {}
        ready: deque[PlannedAttempt] = deque()
        for a in self.plan.attempts:
            if a.attempt_id in self.finished:
                continue
            waiting = [d for d in a.depends_on if d not in self.finished]
            for d in waiting:
                dependents.setdefault(d, []).append(a)
            if not waiting:
                ready.append(a)
        chunks: dict[str, list[AttemptSpec]] = {}  # in flight, by the key of the task that runs them
        window = 4 * self.campaign.limits.agents
        while (ready or chunks) and signals.caught is None:
            while ready and len(chunks) < window:
                # short attempts go in chunks (a task's overhead would dominate), one per task when few are ready
                size = max(1, min(MAX_CHUNK, len(ready) // self.campaign.limits.agents))
                chunk = [self._spec(ready.popleft()) for _ in range(min(size, len(ready)))]
                chunks[chunk[0].attempt_id] = chunk
                ex.submit(chunk[0].attempt_id, chunk)
            for key, results in ex.wait(POLL_S):
                for spec, events in zip(chunks.pop(key), results, strict=True):
                    self._finish(spec.attempt_id, events, bars)
                    for after in dependents.pop(spec.attempt_id, []):
                        if all(x in self.finished for x in after.depends_on):
                            ready.append(after)
            if len(self.buffer) >= BATCH_EVENTS or time.monotonic() - self.last_flush >= FLUSH_S:
                self._flush(ex)
        if signals.caught is not None:  # what was not handed back yet is interrupted (and runs again on resume)
            in_flight = [spec for chunk in chunks.values() for spec in chunk]
            for spec in in_flight:
                self.buffer += [started_event(spec), NewEvent.of(attempt_stream(spec.attempt_id), AttemptFinished(
                    attempt_id=spec.attempt_id, status="interrupted", passed=False, runtime_ms=None, speedup=None,
                    skipped=False, reason=f"stopped by {signals.caught}; runs again when the campaign resumes",
                ))]  # fmt: skip
            self.result.interrupted, self.result.stopped_by = len(in_flight), signals.caught
        else:
            counts = self._counts()
            self.result.counts = counts
            self.buffer.append(
                NewEvent.of(
                    campaign_stream(self.plan.campaign_id),
                    CampaignFinished(campaign_id=self.plan.campaign_id, counts=counts),
                )
            )
        self._flush(ex)
        self.result.events, self.result.append_s, self.result.append_cpu_s = ex.appended()

    def _spec(self, a: PlannedAttempt) -> AttemptSpec:
        source = None
        if a.source is not None:
            outcome = self.finished[a.source]
            text = outcome.skill
            if text and self.skill_filter is not None:
                text = self.skill_filter(text)
            source = SourceSkill(a.source, text, outcome.labels)
        return attempt_spec(self.campaign.sim, self.plan.campaign_id, self.profiles[a.model], a.problem, a.arm,
                            a.replicate, source, self.campaign.filter)  # fmt: skip

    def _finish(self, key: str, events: list[NewEvent], bars: Progress) -> None:
        self.buffer += events
        self.finished[key] = outcome = _Outcome.of([(e.type, e.payload) for e in events])
        self.result.ran += 1
        bars.done(self.by_id[key].arm, outcome.passed)

    def _flush(self, ex: Executor) -> None:
        if self.buffer:
            ex.append(self.store, self.buffer)
            self.buffer = []
        self.last_flush = time.monotonic()

    def _counts(self) -> dict[str, Any]:
        passed = dict.fromkeys(self.plan.count_by_arm(), 0)
        skipped = 0
        for pid, outcome in self.finished.items():
            passed[self.by_id[pid].arm] += outcome.passed
            skipped += outcome.skipped
        return {"attempts": len(self.plan.attempts), "passed": passed, "skipped": skipped}


@dataclass(frozen=True)
class _Outcome:
    """What the run keeps of a finished attempt: its verdict, and its skill for the treatments reading it."""

    passed: bool
    skipped: bool
    skill: str | None
    labels: dict[str, str]

    @classmethod
    def of(cls, events: list[tuple[str, dict[str, Any]]]) -> _Outcome:
        end = next(p for t, p in reversed(events) if t == "AttemptFinished")
        return cls(bool(end["passed"]), bool(end["skipped"]), *skill_of_events(events))


def _finished_tries(store: EventStore, ids: set[str]) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """The events of each attempt's latest try, for attempts whose latest try finished."""
    tries: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    finished: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for ev in store.read(types=["AttemptStarted", "SkillWritten", "LabelAssigned", "AttemptFinished"]):
        pid = ev.payload["subject_id"] if ev.type == "LabelAssigned" else ev.payload["attempt_id"]
        if pid not in ids:
            continue
        if ev.type == "AttemptStarted":
            tries[pid] = []
            finished.pop(pid, None)
        tries.setdefault(pid, []).append((ev.type, ev.payload))
        if ev.type == "AttemptFinished" and ev.payload["status"] == "finished":
            finished[pid] = tries[pid]
    return finished


def _started(store: EventStore, cid: str) -> dict[str, Any] | None:
    for ev in store.read_stream(campaign_stream(cid)):
        if ev.type == "CampaignStarted":
            return ev.payload
    return None


def _has_finished(store: EventStore, cid: str) -> bool:
    return any(ev.type == "CampaignFinished" for ev in store.read_stream(campaign_stream(cid)))


def _changed(plan: Plan, started: dict[str, Any], path: str) -> str:
    old = started.get("fingerprint_parts", {})
    changed = [k.replace("_", " ") for k, v in plan.parts.items() if old.get(k) != v] or ["the plan"]
    return (f"campaign {plan.campaign_id} in {path} was planned with fingerprint {started['plan_fingerprint'][:12]}, "
            f"now {plan.fingerprint[:12]} ({', '.join(changed)} changed); its results would not be comparable — "
            "rerun with --new-campaign to start a separate campaign")  # fmt: skip
