"""The campaign lifecycle: a campaign's plan, run by an executor, recorded by one recorder.

``run_campaign`` is where every campaign starts, simulated or LLM, plain, filtered, chained or with control
arms: it plans (``Campaign.plan``), records ``CampaignStarted`` through the ``CampaignRecorder``, then starts
each planned attempt once what it reads has finished — in plan order, ``Execution.at_once`` tasks at a time on
the campaign's ``Execution`` (a process pool, worker threads or Ray tasks) — and records what the runner hands
back, then ``CampaignFinished``.

Resuming: the campaign id derives from what defines the campaign (a simulated one's configuration and seed;
an LLM campaign file names its own), every attempt id from the campaign id and the attempt's place, so running
a campaign again continues it: attempts whose latest try finished are kept, the others (``infra_error``,
``interrupted``, never recorded) run again under their id. A changed plan fingerprint is refused unless a new
campaign is asked for.

Stopping: the first SIGINT/SIGTERM stops starting attempts. Attempts whose runner records as it goes are asked
to stop (the stop flag) and record themselves ``interrupted``; the others in flight are recorded
``interrupted`` at once. A second signal raises ``KeyboardInterrupt`` where the run is.

``simulate_plan`` runs a plan the same way in memory, in this thread, without a store (calibration).
"""

from __future__ import annotations

import gc
import heapq
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from mkbsim.campaigns._attempt import (
    STUDY_BUDGET,
    AttemptOutcome,
    AttemptRunner,
    AttemptTask,
    PlannedAttempt,
    SkillText,
    SkillTransform,
    interrupted,
    skipped,
)
from mkbsim.campaigns._executors import Executor, InlineDispatch
from mkbsim.campaigns._plan import Plan
from mkbsim.campaigns._progress import Progress
from mkbsim.campaigns._reading import prepare
from mkbsim.campaigns._recorder import CampaignRecorder, Earlier
from mkbsim.campaigns._signals import StopFlag, StopSignals
from mkbsim.campaigns._summary import CampaignSummary
from mkbsim.errors import UserError
from mkbsim.events import EventStore, NewEvent

POLL_S = 0.05  # how long a wait for results lasts at most (signals are noticed between waits)
_INLINE_CHUNK = 64  # attempts per runner call in memory (no task overhead to amortize, only the call's)


@dataclass
class Execution:
    """How a campaign's attempts run. ``dispatch`` runs ``guarded(runner)`` on lists of at most ``chunk``
    tasks, ``at_once`` lists in flight (a list holds fewer when few attempts are ready for ``workers``).

    ``live``: the runner records its attempts as they go, and a stop is asked of it through ``stop``
    and waited for; otherwise the attempts in flight when a signal arrives are recorded ``interrupted`` at
    once. ``budget``: what ``AttemptStarted`` records of attempts the lifecycle records itself (skipped and
    interrupted ones). ``cap_reached``: no new attempt starts once it says so (a cost cap). ``settle``: sees
    every outcome (a Ray run adds its tasks' costs to the campaign's ledger). ``report``: what the execution
    adds to ``CampaignFinished`` and to the summary's lines (costs, network isolation).
    """

    dispatch: Executor
    workers: int
    at_once: int
    chunk: int = 1
    live: bool = False
    stop: StopFlag = field(default_factory=threading.Event)
    budget: Mapping[str, Any] = field(default_factory=lambda: dict(STUDY_BUDGET))
    cap_reached: Callable[[], bool] = lambda: False
    settle: Callable[[AttemptOutcome], None] = lambda outcome: None
    report: Callable[[], tuple[dict[str, Any], list[str]]] = lambda: ({}, [])


class Campaign(Protocol):
    """A campaign definition the lifecycle can run: ``SimCampaign`` (``mkbsim.campaigns``) or ``LlmCampaign``
    (``mkbsim.agents``)."""

    @property
    def filter(self) -> str | None:
        """The skill filter every transferred skill goes through (its name), or None."""

    def plan(self, campaign_id: str | None = None) -> Plan:
        """The campaign's plan, under its own id or ``campaign_id`` (a new campaign after a changed plan)."""

    def execution(self, store: EventStore, executor: str, ray_address: str | None) -> AbstractContextManager[Execution]:
        """Where and how its attempts run (``executor``: ``local`` or ``ray``), for as long as the block lasts."""


@dataclass(frozen=True)
class _Guarded:
    """What an executor runs: the runner, with a raised exception handed back as the result (so the lifecycle
    sees every task come back: ``KeyboardInterrupt`` from an attempt that recorded itself interrupted)."""

    runner: AttemptRunner

    def __call__(self, tasks: list[AttemptTask]) -> list[AttemptOutcome] | BaseException:
        try:
            return self.runner(tasks)
        except BaseException as exc:
            return exc


def guarded(runner: AttemptRunner) -> Callable[[list[AttemptTask]], list[AttemptOutcome] | BaseException]:
    return _Guarded(runner)


def run_campaign(
    store: EventStore,
    campaign: Campaign,
    *,
    executor: str = "local",
    ray_address: str | None = None,
    new_campaign: bool = False,
    progress: bool = False,
    skill_filter: SkillTransform | None = None,
) -> CampaignSummary:
    """Run ``campaign`` into ``store``, or continue it there; returns what this run did (also recorded in
    ``CampaignFinished`` unless a signal stopped it).

    ``skill_filter``: the transform ``campaign.filter`` names (the caller resolves the name: `mkbsim run`
    through ``mkbsim.plugins.get_filter``). ``new_campaign``: where the stored campaign was planned differently, start a
    separate one (its id suffixed with the new fingerprint). ``progress``: bars per arm (and, for attempts that
    take minutes, a line per attempt) on the terminal."""
    given = skill_filter.name if skill_filter is not None else None
    if given != campaign.filter:
        raise UserError(f"campaign.filter is {campaign.filter or 'not set'} but the filter given is {given or 'none'}")
    if executor not in ("local", "ray"):
        raise UserError(f"unknown executor {executor!r}; use local or ray")
    if ray_address is not None and executor != "ray":
        raise UserError("--ray-address needs --executor ray")
    recorder = CampaignRecorder(store)
    # the execution first: what it refuses (a scorer that cannot travel to Ray workers) leaves the store untouched
    with campaign.execution(store, executor, ray_address) as execution:
        try:
            plan = recorder.start(campaign.plan(), campaign.plan, new_campaign=new_campaign)
            finished_before = recorder.finished_before(plan.campaign_id)
            recorder.attach(execution.dispatch)
            earlier = recorder.earlier({a.attempt_id for a in plan.attempts} | {d for a in plan.attempts
                                                                               for d in a.depends_on})  # fmt: skip
            run = _Run(plan, execution, skill_filter, earlier, recorder.record)
            summary = run.summary
            summary.already_finished = finished_before and summary.kept == len(plan.attempts)
            # what is loaded by now (catalogue, design spaces, modules) needs no cycle collection: without it the
            # collector rescans all of it during the appends, which then run well below the store's own rate
            gc.freeze()
            try:
                title = f"campaign {plan.campaign_id}"
                with Progress(plan.count_by_arm(), title, progress, lines=execution.live) as bars, \
                        _StopSignals() as signals:  # fmt: skip
                    run.execute(bars, signals)
            finally:
                gc.unfreeze()
                recorder.flush()  # what finished before a failure is kept
            summary.extra, summary.extra_lines = execution.report()
            if summary.stopped_by is None:
                recorder.finish(plan.campaign_id, summary.counts())
            summary.events, summary.append_s, summary.append_cpu_s = recorder.stats()
        finally:
            execution.dispatch.close()
    return summary


class _StopSignals(StopSignals):
    """The first SIGINT/SIGTERM stops the run (it ends once the attempts in flight are settled); a second one
    raises ``KeyboardInterrupt`` at once."""

    def _handle(self, signum: int, frame: Any) -> None:
        again = self.caught is not None
        super()._handle(signum, frame)
        if again:
            raise KeyboardInterrupt(self.caught)


class _Run:
    """The scheduler: starts each planned attempt once the attempts it reads have finished (ready ones in plan
    order), hands ``record`` the events of every attempt that ends, and ``ended`` every attempt with its outcome.
    ``earlier``: the attempts (planned or named by the plan) whose latest try finished before this run."""

    def __init__(
        self,
        plan: Plan,
        execution: Execution,
        transform: SkillTransform | None,
        earlier: Mapping[str, Earlier],
        record: Callable[[Iterable[NewEvent]], None],
        ended: Callable[[PlannedAttempt, AttemptOutcome], None] = lambda a, outcome: None,
    ) -> None:
        self.plan, self.execution, self.transform, self.record, self.ended = plan, execution, transform, record, ended
        self.summary = CampaignSummary(plan.campaign_id, len(plan.attempts))
        self.index = {a.attempt_id: i for i, a in enumerate(plan.attempts)}
        # attempt id -> the skill of its latest try, for attempts (planned or named) whose latest try finished
        self.skills: dict[str, SkillText] = {aid: e.skill for aid, e in earlier.items()}
        self.kept = [(a, earlier[a.attempt_id].outcome) for a in plan.attempts if a.attempt_id in earlier]
        for a, outcome in self.kept:
            self.summary.add(a.arm, outcome, kept=True)
        self.ready: list[tuple[int, PlannedAttempt]] = []
        self.waiting: dict[str, list[PlannedAttempt]] = {}  # attempt id -> planned attempts that read it
        for a in plan.attempts:
            if a.attempt_id in self.skills:
                continue
            missing = [d for d in a.depends_on if d not in self.skills]
            for d in missing:
                self.waiting.setdefault(d, []).append(a)
            if not missing:
                self.ready.append((self.index[a.attempt_id], a))
        heapq.heapify(self.ready)

    def execute(self, bars: Progress, signals: StopSignals) -> None:
        ex, summary = self.execution, self.summary
        self.bars = bars
        for a, outcome in self.kept:
            bars.done(a.arm, outcome.passed, f"{a.attempt_id}: {_verdict(outcome)} (kept)")
        in_flight: dict[str, list[AttemptTask]] = {}
        failure: BaseException | None = None
        while True:
            if (signals.caught is not None or failure is not None) and not ex.stop.is_set():
                ex.stop.set()
            stopping = ex.stop.is_set()
            while self.ready and len(in_flight) < ex.at_once and not stopping:
                if ex.cap_reached():  # no new attempt; those running finish
                    summary.stopped_by_cost_cap = True
                    self.ready.clear()
                    break
                tasks = self._take(max(1, min(ex.chunk, len(self.ready) // ex.workers)))
                if tasks:
                    in_flight[tasks[0].attempt_id] = tasks
                    ex.dispatch.submit(tasks[0].attempt_id, tasks)
                    for task in tasks:
                        bars.line(f"{task.attempt_id}: running")
            if not in_flight and (not self.ready or stopping):
                break
            if stopping and not ex.live:
                break
            for key, result in ex.dispatch.wait(POLL_S):
                tasks = in_flight.pop(key)
                if isinstance(result, KeyboardInterrupt):  # its attempt recorded itself interrupted
                    for task in tasks:
                        self._done(task.attempt, _stopped(task.attempt_id, "interrupted by the operator"))
                elif isinstance(result, BaseException):
                    failure = failure or result
                else:
                    for task, outcome in zip(tasks, result, strict=True):
                        self._done(task.attempt, outcome)
        if signals.caught is not None:
            why = f"stopped by {signals.caught}; runs again when the campaign resumes"
            for tasks in in_flight.values():  # handed out and never handed back
                for task in tasks:
                    self.record(interrupted(task, why, ex.budget))
                    self._done(task.attempt, _stopped(task.attempt_id, why), record=False)
            summary.stopped_by = signals.caught
        if failure is not None:
            raise failure

    def _take(self, size: int) -> list[AttemptTask]:
        """Up to ``size`` ready attempts as tasks; those with nothing to read are recorded skipped on the way."""
        tasks: list[AttemptTask] = []
        while self.ready and len(tasks) < size:
            _, a = heapq.heappop(self.ready)
            prepared = prepare(self.plan.campaign_id, a, self.skills, self.transform)
            if isinstance(prepared, str):
                self._done(a, skipped(AttemptTask(self.plan.campaign_id, a, source_attempt_id=a.source), prepared,
                                      self.execution.budget))  # fmt: skip
            else:
                tasks.append(prepared)
        return tasks

    def _done(self, a: PlannedAttempt, outcome: AttemptOutcome, *, record: bool = True) -> None:
        if record:
            self.record(outcome.events)
        self.ended(a, outcome)
        self.execution.settle(outcome)
        self.summary.add(a.arm, outcome, kept=False)
        self.bars.done(a.arm, outcome.passed, f"{a.attempt_id}: {_verdict(outcome)}")
        if outcome.status != "finished":
            return
        self.skills[a.attempt_id] = SkillText(outcome.skill, outcome.skill_labels)
        for after in self.waiting.pop(a.attempt_id, []):
            if all(d in self.skills for d in after.depends_on):
                heapq.heappush(self.ready, (self.index[after.attempt_id], after))


def _stopped(attempt_id: str, why: str) -> AttemptOutcome:
    return AttemptOutcome(attempt_id, "interrupted", False, None, None, False, why, None)


def _verdict(outcome: AttemptOutcome) -> str:
    flag = "passed" if outcome.passed else "skipped" if outcome.skipped else "failed"
    return f"{outcome.status}, {flag}"


def simulate_plan(
    campaign_id: str, attempts: Sequence[PlannedAttempt], runner: AttemptRunner
) -> list[tuple[PlannedAttempt, AttemptOutcome]]:
    """Run a plan's ``attempts`` in this thread without a store, as ``run_campaign`` runs them (the same
    scheduler, skips and readings): every attempt with its outcome, in the order they ended."""
    ended: list[tuple[PlannedAttempt, AttemptOutcome]] = []
    execution = Execution(InlineDispatch(guarded(runner)), workers=1, at_once=1, chunk=_INLINE_CHUNK)
    plan = Plan(campaign_id, {}, {}, tuple(attempts))
    run = _Run(plan, execution, None, {}, lambda events: None, lambda a, outcome: ended.append((a, outcome)))
    run.execute(Progress(plan.count_by_arm(), "", False), StopSignals())
    return ended
