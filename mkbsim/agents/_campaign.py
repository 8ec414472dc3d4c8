"""An LLM campaign: for each agent, problem and replicate, both solo attempts, then the
skill-conditioned attempt of each configured direction.

Attempt ids are deterministic, so running the same campaign file again resumes it: attempts that
finished are kept, attempts that ended on infrastructure (or never finished) run again under
their id, and a treatment runs once its source has finished. The cost cap stops new attempts.

Concurrency: ``[limits] agents`` attempts run at once. Ready attempts start in plan order, so
``agents = 1`` runs exactly the sequential order: per (agent, problem, replicate) both solos, then each
treatment once its source solo finished. One scheduler (``_CampaignRun.execute``) hands them to a
``Dispatch``:

- local (``ThreadDispatch``): each attempt in a worker thread (it mostly waits on its model's HTTP
  replies, its sandbox's subprocesses and the verifier's processes). The threads share the event store
  (it serializes appends) and the cost ledger; verifications are limited by ``[limits]
  gpu_verifier_slots`` (``limit_scoring``).
- Ray (``RayExecutor``): each attempt a Ray task reserving its sandbox's cores, retried when its worker
  dies. Its reads and appends go through the writer actor on the head node (``RemoteStore``), so the
  events are the local run's; its scorers call verifier actors (``RayVerifiers``). A task closes a try
  of its attempt left without an end (a worker that died) as interrupted before running it again, as a
  resume does.

Either way, where the sandbox's ``cpus`` is a count, each running attempt's commands get cores of their
machine that no other attempt there holds (``NodeCores``: lock files shared by every process there).

Stopping: SIGINT/SIGTERM set a stop flag that the attempts in flight check (``run_attempt``'s
``stop``; on Ray they read it from the writer actor); each records itself ``interrupted`` and the
campaign raises ``KeyboardInterrupt`` once all have. A second signal raises at once: attempts still in
flight then have no recorded end, and the next run closes them as interrupted before running them again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import json
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from mkbsim.agents._attempt import AttemptOutcome, AttemptSpec, run_attempt
from mkbsim.agents._config import LlmCampaignConfig
from mkbsim.agents._cores import NodeCores
from mkbsim.agents._ledger import CostLedger
from mkbsim.agents._model import ModelClient, ModelConfig
from mkbsim.agents._sandbox import SandboxConfig, sandbox_isolation
from mkbsim.agents._scoring import Scorer, ScorerFactory, Unscorable, unscorable
from mkbsim.agents._slots import ScoringSlots, default_verifier_slots, limit_scoring
from mkbsim.agents._transfer import (
    DIRECTIONS,
    SkillFilter,
    attempt_id_for,
    latest_finish,
    run_treatment,
    skill_arm,
    solo_arm,
)
from mkbsim.campaigns._executors import Dispatch, ThreadDispatch
from mkbsim.campaigns._signals import StopFlag, StopSignals
from mkbsim.catalog import Catalog, Problem
from mkbsim.errors import UserError
from mkbsim.events import (
    AttemptFinished,
    CampaignFinished,
    CampaignStarted,
    EventLog,
    EventStore,
    NewEvent,
    attempt_stream,
    campaign_stream,
)
from mkbsim.events._types import Dsl


@dataclass
class CampaignSummary:
    campaign_id: str
    statuses: Counter[str] = field(default_factory=Counter)
    passed: int = 0
    skipped: int = 0
    reused: int = 0
    stopped_by_cost_cap: bool = False
    network_isolated: bool = False
    network_detail: str = ""
    costs: dict[str, object] = field(default_factory=dict)

    def counts(self) -> dict[str, Any]:
        return {
            "attempts": dict(self.statuses), "passed": self.passed, "skipped": self.skipped,
            "reused_from_earlier_runs": self.reused, "stopped_by_cost_cap": self.stopped_by_cost_cap,
            "network_isolated": self.network_isolated, "network_detail": self.network_detail, **self.costs,
        }  # fmt: skip

    def lines(self) -> list[str]:
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(self.statuses.items())) or "none"
        c = self.costs
        out = [
            f"campaign {self.campaign_id}: attempts {statuses} ({self.passed} passed, {self.skipped} skipped, "
            f"{self.reused} kept from earlier runs)",
            f"cost ${c.get('cost_usd', 0):.4f} over {c.get('llm_calls', 0)} LLM calls, {c.get('tokens', 0)} tokens"
            + (f"; {c['unpriced_calls']} calls had no known price" if c.get("unpriced_calls") else ""),
            "network: isolated (" + self.network_detail + ")"
            if self.network_isolated
            else f"network: NOT isolated — {self.network_detail}",
        ]
        if self.stopped_by_cost_cap:
            out.append(f"stopped: the cost cap of ${c.get('cost_cap_usd')} was reached; run again with a higher cap")
        if self.statuses.get("infra_error"):
            out.append("attempts that ended in infra_error run again when the campaign is run again")
        return out


def plan_fingerprint(config: LlmCampaignConfig, problems: list[Problem]) -> str:
    """What defines the campaign's measurements; a resume with a different plan is refused."""
    plan = {
        "agents": [{"model": a.model, "name": a.label, "params": dict(a.params)} for a in config.agents],
        "problems": [p.id for p in problems], "directions": list(config.directions),
        "replicates": config.replicates, "budget": [config.budget.minutes, config.budget.submissions],
        "verifier": [config.verifier_backend, config.verifier_protocol],
    }  # fmt: skip
    if config.filter is not None:  # only when set: campaigns planned before filters keep their fingerprint
        plan["filter"] = config.filter
    return hashlib.sha256(json.dumps(plan, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _begin(store: EventStore, config: LlmCampaignConfig, fingerprint: str) -> None:
    from mkbsim import __version__

    stream = campaign_stream(config.campaign_id)
    started = [e for e in store.read_stream(stream) if e.type == CampaignStarted.TYPE]
    if started:
        if started[0].payload["plan_fingerprint"] != fingerprint:
            raise UserError(
                f"campaign {config.campaign_id!r} already exists in {store.path} with a different plan "
                "(agents, problems, directions, replicates, budget, verifier or filter changed); use a new campaign id"
            )
        return
    payload = CampaignStarted(
        campaign_id=config.campaign_id, config=json.loads(json.dumps(dict(config.raw), default=str)),
        plan_fingerprint=fingerprint, code_version=__version__,
    )  # fmt: skip
    store.append([NewEvent.of(stream, payload)], expected_version=0)


def _close_unfinished(store: EventLog, attempt_id: str) -> dict[str, Any] | None:
    """The end of the attempt's latest try; a try that never recorded one (its process or Ray worker died)
    is closed as interrupted, so that the attempt runs again under its id."""
    finish = latest_finish(store, attempt_id)
    version = len(store.read_stream(attempt_stream(attempt_id)))
    if finish is None and version:
        finished = AttemptFinished(
            attempt_id=attempt_id, status="interrupted", passed=False, runtime_ms=None, speedup=None,
            skipped=False, reason="no end was recorded (the run was killed); rerun",
        )  # fmt: skip
        store.append([NewEvent.of(attempt_stream(attempt_id), finished)], expected_version=version)
    return finish


@dataclass(frozen=True, order=True)
class _Job:
    """One planned attempt; ``index`` is its place in the sequential order (ready jobs start by it)."""

    index: int
    attempt_id: str = field(compare=False)
    agent: ModelConfig = field(compare=False)
    problem: Problem = field(compare=False)
    replicate: int = field(compare=False)
    dsl: Dsl = field(compare=False)
    direction: str | None = field(compare=False, default=None)  # None: a solo
    source_id: str | None = field(compare=False, default=None)


@dataclass(frozen=True)
class _Done:
    """What became of a job: its outcome, or what ended it (``KeyboardInterrupt``: a stop, which the attempt
    recorded), and its model calls' cost where the campaign's ledger is not shared (a Ray task's)."""

    outcome: AttemptOutcome | None
    error: BaseException | None = None
    charges: CostLedger | None = None


@dataclass(frozen=True)
class _Attempts:
    """Runs one job to its end wherever the dispatch puts it: a worker thread here, or a Ray task (this
    object is then shipped to the workers; its store, stop flag and scorers lead back to the head node).

    ``ledger`` None: each job charges a ledger of its own and sends it back. ``cores``: where the sandbox's
    ``cpus`` is a count, each running attempt's sandbox takes cores of its machine that no other attempt
    there holds, of this campaign or another (while there are enough). ``backend``: the verifier's; with
    ``[verifier] skip_unverifiable``, an attempt in a DSL it cannot run gets an ``Unscorable`` scorer (it ends
    as infra_error without asking its model).
    """

    config: LlmCampaignConfig
    store: EventLog
    stop: StopFlag
    scorer_factory: ScorerFactory
    client_factory: Callable[[ModelConfig], ModelClient]
    skill_filter: SkillFilter | None
    ledger: CostLedger | None
    backend: str | None = None
    cores: NodeCores = field(default_factory=NodeCores)

    def __call__(self, job: _Job) -> _Done:
        ledger = self.ledger or CostLedger()
        charges = None if self.ledger else ledger
        try:
            cpus = self.config.sandbox.cpus
            if not isinstance(cpus, int):  # an explicit core list is used as given
                return _Done(self._run(job, self.config.sandbox, ledger), charges=charges)
            with self.cores.hold(cpus) as cores:
                sandbox = dataclasses.replace(self.config.sandbox, cpus=cores)
                return _Done(self._run(job, sandbox, ledger), charges=charges)
        except BaseException as exc:  # KeyboardInterrupt (a stop) included: the scheduler decides
            return _Done(None, exc, charges)

    def _run(self, job: _Job, sandbox: SandboxConfig, ledger: CostLedger) -> AttemptOutcome:
        c = self.config
        finish = _close_unfinished(self.store, job.attempt_id)
        if finish is not None and finish["status"] == "finished":  # a Ray task rerun after its attempt ended
            return _outcome_of(job.attempt_id, finish)
        if job.direction is None:
            spec = AttemptSpec(job.attempt_id, c.campaign_id, job.problem, job.dsl, solo_arm(job.dsl), job.replicate)
            return run_attempt(
                self.store, spec, job.agent, self._scorer(job.problem, job.dsl), sandbox=sandbox,
                budget=c.budget, loop=c.loop, ledger=ledger, client_factory=self.client_factory, stop=self.stop,
            )  # fmt: skip
        assert job.source_id is not None
        return run_treatment(
            self.store, attempt_id=job.attempt_id, source_attempt_id=job.source_id, campaign_id=c.campaign_id,
            problem=job.problem, direction=job.direction, model=job.agent, scorer_factory=self._scorer,
            sandbox=sandbox, replicate=job.replicate, budget=c.budget, loop=c.loop, ledger=ledger,
            skill_filter=self.skill_filter, client_factory=self.client_factory, stop=self.stop,
        )  # fmt: skip

    def _scorer(self, problem: Problem, dsl: str) -> Scorer:
        why = unscorable(self.backend, dsl) if self.config.skip_unverifiable else None
        return Unscorable(why) if why else self.scorer_factory(problem, dsl)


def attempt_cpus(config: LlmCampaignConfig) -> int:
    """The cores one attempt's sandbox commands use (what a Ray task of the campaign reserves)."""
    cpus = config.sandbox.cpus
    return len(cpus) if isinstance(cpus, tuple) else cpus


def _check_shippable(**parts: object) -> None:
    """What a Ray campaign ships to its workers must pickle (as Ray does it); say which part does not."""
    from ray import cloudpickle

    for name, part in parts.items():
        try:
            cloudpickle.dumps(part)
        except Exception as exc:
            hint = " (on Ray, verify through RayVerifiers)" if name == "scorer_factory" else ""
            raise UserError(f"the Ray executor ships the {name.replace('_', ' ')} to its workers, but "
                            f"{type(part).__name__} cannot be pickled: {exc}{hint}") from None  # fmt: skip


class _StopSignals(StopSignals):
    """The first SIGINT/SIGTERM asks the attempts in flight to stop (the run loop sets the stop flag);
    a second one stops at once."""

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        again = self.caught is not None
        super()._handle(signum, frame)
        if again:
            raise KeyboardInterrupt(self.caught)


class _CampaignRun:
    def __init__(self, config: LlmCampaignConfig, store: EventStore, stop: StopFlag,
                 progress: Callable[[str], None]) -> None:  # fmt: skip
        self.config, self.store, self.stop, self.progress = config, store, stop, progress
        self.ledger = CostLedger.from_store(store, config.campaign_id, config.cost_cap_usd)
        network = sandbox_isolation(config.sandbox)
        self.summary = CampaignSummary(
            config.campaign_id, network_isolated=network.isolated, network_detail=network.detail
        )
        self.finished: set[str] = set()  # attempts whose latest try finished (earlier runs or this one)

    def plan(self, problems: list[Problem]) -> list[_Job]:
        c, jobs = self.config, list[_Job]()
        for agent in c.agents:
            for problem in problems:
                for replicate in range(c.replicates):
                    # both solos: each is one direction's source and the other's baseline
                    for dsl in ("cutedsl", "tirx"):
                        aid = attempt_id_for(c.campaign_id, agent.label, problem.id, solo_arm(dsl), replicate)
                        jobs.append(_Job(len(jobs), aid, agent, problem, replicate, dsl))
                    for direction in c.directions:
                        source, target = DIRECTIONS[direction]
                        src = attempt_id_for(c.campaign_id, agent.label, problem.id, solo_arm(source), replicate)
                        aid = attempt_id_for(c.campaign_id, agent.label, problem.id, skill_arm(direction), replicate)
                        jobs.append(_Job(len(jobs), aid, agent, problem, replicate, target, direction, src))
        return jobs

    def _record(self, outcome: AttemptOutcome, reused: bool) -> None:
        s = self.summary
        s.statuses[outcome.status] += 1
        s.passed += outcome.passed
        s.skipped += outcome.skipped
        s.reused += reused
        flag = "passed" if outcome.passed else "skipped" if outcome.skipped else "failed"
        self.progress(f"{outcome.attempt_id}: {outcome.status}, {flag}" + (" (kept)" if reused else ""))

    def execute(self, jobs: list[_Job], dispatch: Dispatch) -> None:
        """Run every job not finished yet, ``agents`` at a time on ``dispatch``, each once its source has
        finished; closes ``dispatch``."""
        ready: list[_Job] = []
        waiting: dict[str, list[_Job]] = {}  # source attempt id -> treatments waiting for it
        for job in jobs:
            finish = latest_finish(self.store, job.attempt_id)
            if finish is not None and finish["status"] == "finished":
                self.finished.add(job.attempt_id)
                self._record(_outcome_of(job.attempt_id, finish), reused=True)
        for job in jobs:
            if job.attempt_id in self.finished:
                continue
            if job.source_id is None or job.source_id in self.finished:
                heapq.heappush(ready, job)
            else:
                waiting.setdefault(job.source_id, []).append(job)

        in_flight = 0
        failure: BaseException | None = None
        try:
            with _StopSignals() as signals:
                while True:
                    if (signals.caught is not None or failure is not None) and not self.stop.is_set():
                        self.stop.set()  # the attempts in flight end as interrupted
                    while ready and in_flight < self.config.agents_at_once and not self.stop.is_set():
                        if self.ledger.cap_reached:  # no new attempt; those running finish
                            self.summary.stopped_by_cost_cap = True
                            ready.clear()
                            break
                        job = heapq.heappop(ready)
                        self.progress(f"{job.attempt_id}: running")
                        dispatch.submit(job.attempt_id, job)
                        in_flight += 1
                    if in_flight == 0 and (not ready or self.stop.is_set()):
                        break
                    for key, done in dispatch.wait(0.1):  # wakes up to notice signals
                        in_flight -= 1
                        if done.charges is not None:
                            self.ledger.add(done.charges)
                        if done.outcome is not None:
                            self._record(done.outcome, reused=False)
                            if done.outcome.status == "finished":
                                self.finished.add(key)
                                for after in waiting.pop(key, []):
                                    heapq.heappush(ready, after)
                        elif not isinstance(done.error, KeyboardInterrupt):  # interrupted attempts recorded it
                            failure = failure or done.error
        finally:
            dispatch.close()
        if failure is not None:
            raise failure
        if signals.caught is not None:
            raise KeyboardInterrupt(signals.caught)


def _outcome_of(attempt_id: str, finish: dict[str, Any]) -> AttemptOutcome:
    return AttemptOutcome(
        attempt_id=attempt_id, status=finish["status"], passed=finish["passed"], runtime_ms=finish["runtime_ms"],
        speedup=finish["speedup"], skipped=finish["skipped"], reason=finish.get("reason"), skill=None,
        counted_submissions=finish.get("counted_submissions", 0), tokens=finish.get("tokens", 0),
        cost_usd=finish.get("cost_usd", 0.0), network_isolated=finish.get("network_isolated", False),
        network_detail="", infra_stall_s=finish.get("infra_stall_s", 0.0),
    )  # fmt: skip


def run_llm_campaign(
    config: LlmCampaignConfig,
    store: EventStore,
    catalog: Catalog,
    scorer_factory: ScorerFactory,
    *,
    client_factory: Callable[[ModelConfig], ModelClient] = ModelClient,
    progress: Callable[[str], None] = lambda line: None,
    skill_filter: SkillFilter | None = None,
    executor: str = "local",
    ray_address: str | None = None,
) -> CampaignSummary:
    """Run (or resume) the campaign; returns its summary, also stored as ``CampaignFinished``.

    ``skill_filter``: the filter named by ``campaign.filter`` (the caller resolves the name, e.g.
    with ``skill_filters.get``: mkbsim does not import the plugins). Raises ``KeyboardInterrupt``
    after a stop signal, once the attempts in flight have recorded themselves interrupted.

    ``executor``: ``local`` runs attempts in threads of this process; ``ray`` as Ray tasks on the cluster
    at ``ray_address`` (None: a private instance here), their events appended by a writer actor on this
    node. For Ray, ``scorer_factory``, ``client_factory`` and ``skill_filter`` are shipped to the workers
    (``RayVerifiers`` is the scorer factory for it), and the cost of an attempt counts toward the cap
    when it ends.
    """
    if (skill_filter.name if skill_filter else None) != config.filter:
        given = skill_filter.name if skill_filter else "none"
        want = config.filter or "not set"
        raise UserError(f"{config.path}: campaign.filter is {want} but the filter given is {given}")
    try:
        problems = catalog.select(config.problems)
    except KeyError as exc:
        raise UserError(f"{config.path}: campaign.problems: {exc.args[0]}") from None
    sandbox_isolation(config.sandbox)  # commands that cannot be isolated as configured: refused before any store
    if executor == "ray":  # refused before anything is stored
        _check_shippable(scorer_factory=scorer_factory, client_factory=client_factory, skill_filter=skill_filter)
    _begin(store, config, plan_fingerprint(config, problems))
    # the verifier's factories say which backend they resolved
    backend = getattr(scorer_factory, "backend", None) or config.verifier_backend
    stop: StopFlag
    if executor == "ray":
        from mkbsim.campaigns import RayExecutor, RemoteStop, RemoteStore, connect_ray, start_writer

        cpus = attempt_cpus(config)
        connect_ray(ray_address, config.agents_at_once * cpus)
        writer = start_writer(str(store.path))
        stop = RemoteStop(writer)
        run = _CampaignRun(config, store, stop, progress)
        # the scorers go to the workers as they are (RayVerifiers: a pool actor limits the verifications)
        attempts = _Attempts(config, RemoteStore(writer), stop, scorer_factory, client_factory, skill_filter,
                             ledger=None, backend=backend)  # fmt: skip
        dispatch: Dispatch = RayExecutor(attempts, config.agents_at_once * cpus, ray_address, str(store.path),
                                         writer=writer, task_cpus=cpus)  # fmt: skip
    elif executor == "local":
        stop = threading.Event()
        run = _CampaignRun(config, store, stop, progress)
        slots = config.gpu_verifier_slots or getattr(scorer_factory, "count", None)
        if not isinstance(slots, int):  # a factory that does not say how many verifiers it runs
            slots = default_verifier_slots(config.verifier_backend or "cpu")
        limited = limit_scoring(scorer_factory, ScoringSlots(slots))
        attempts = _Attempts(config, store, stop, limited, client_factory, skill_filter, ledger=run.ledger,
                             backend=backend)  # fmt: skip
        dispatch = ThreadDispatch(attempts, config.agents_at_once)
    else:
        raise ValueError(f"unknown executor {executor!r}; use local or ray")
    run.execute(run.plan(problems), dispatch)
    summary = run.summary
    summary.costs = run.ledger.summary()
    finished = CampaignFinished(campaign_id=config.campaign_id, counts=summary.counts())
    store.append([NewEvent.of(campaign_stream(config.campaign_id), finished)])
    return summary
