"""LLM campaigns, the agents' side: ``LlmCampaign`` (what ``mkbsim.campaigns.run_campaign`` needs to plan and
run a campaign file's attempts) and ``LlmRunner``, the ``AttemptRunner`` of LLM attempts.

    config = load_llm_campaign("examples/llm.toml")
    with VerifierSlots(config.verifier_backend, config.protocol, config.gpu_verifier_slots) as scorers:
        summary = run_campaign(store, LlmCampaign(config, load_catalog(), scorers))

The plan is the transfer protocol's (``mkbsim.campaigns``): per agent, problem and replicate both solos, then
per direction the skill-conditioned attempt and the control arms the file asks for; attempt ids are readable
(``attempt_id_for``), so running the same file again resumes the campaign. The lifecycle starts ready attempts
in plan order — ``[limits] agents`` at once — each once the attempts it reads have finished, so ``agents = 1``
runs exactly the sequential order; the cost cap stops new attempts.

Where they run:
- local: each attempt in a worker thread of this process (it mostly waits on its model's HTTP replies, its
  sandbox's subprocesses and the verifier's processes). The threads share the event store (it serializes
  appends) and the cost ledger; verifications are limited by ``[limits] gpu_verifier_slots``
  (``limit_scoring``).
- Ray: each attempt a Ray task reserving its sandbox's cores, retried when its worker dies. Its reads and
  appends go through the writer actor on the head node (``RemoteStore``), so the events are the local run's;
  its scorers call verifier actors (``RayVerifiers``). A task closes a try of its attempt left without an end
  (a worker that died) as interrupted before running it again, as a resume does.

Either way an attempt records its events as they happen (monitors see it live), and where the sandbox's
``cpus`` is a count, each running attempt's commands get cores of their machine that no other attempt there
holds (``NodeCores``: lock files shared by every process there). A stop (SIGINT/SIGTERM) sets the stop flag
the attempts in flight check (``run_attempt``'s ``stop``; on Ray they read it from the writer actor); each
records itself ``interrupted``.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from mkbsim.agents._attempt import AttemptSpec, run_attempt
from mkbsim.agents._config import LlmCampaignConfig
from mkbsim.agents._cores import NodeCores
from mkbsim.agents._ledger import CostLedger
from mkbsim.agents._model import ModelClient, ModelConfig
from mkbsim.agents._sandbox import SandboxConfig, sandbox_isolation
from mkbsim.agents._scoring import Scorer, ScorerFactory, Unscorable, unscorable
from mkbsim.agents._secrets import without_credentials
from mkbsim.agents._slots import ScoringSlots, default_verifier_slots, limit_scoring
from mkbsim.agents._transfer import attempt_id_for, latest_finish, recorded_skill
from mkbsim.campaigns import (
    AttemptOutcome,
    AttemptTask,
    Execution,
    Executor,
    Plan,
    RayExecutor,
    RemoteStop,
    RemoteStore,
    StopFlag,
    ThreadDispatch,
    connect_ray,
    fingerprint_parts,
    guarded,
    start_writer,
    transfer_attempts,
)
from mkbsim.catalog import Catalog, Problem
from mkbsim.errors import UserError
from mkbsim.events import AttemptFinished, EventLog, EventStore, NewEvent, attempt_stream


@dataclass(frozen=True)
class LlmCampaign:
    """An LLM campaign file's configuration, with the problems' ``catalog``, the verifier's ``scorers`` (one
    per (problem, DSL); ``RayVerifiers`` on the Ray executor) and the model client."""

    config: LlmCampaignConfig
    catalog: Catalog
    scorers: ScorerFactory
    client_factory: Callable[[ModelConfig], ModelClient] = ModelClient

    @property
    def filter(self) -> str | None:
        return self.config.filter

    def problems(self) -> list[Problem]:
        try:
            return self.catalog.select(self.config.problems)
        except KeyError as exc:
            raise UserError(f"{self.config.path}: campaign.problems: {exc.args[0]}") from None

    def plan(self, campaign_id: str | None = None) -> Plan:
        c, problems = self.config, self.problems()
        cid = campaign_id or c.campaign_id
        attempts = transfer_attempts(
            cid, [a.label for a in c.agents], [(p.id, p.family) for p in problems], replicates=c.replicates,
            directions=c.directions, controls=c.controls, filter=c.filter, ids=attempt_id_for,
            seeds=lambda model, problem, arm, rep: 0, donor_seed=c.campaign_id,
        )  # fmt: skip
        measured: dict[str, Any] = {
            "agents": [{"model": a.model, "name": a.label, "params": dict(a.params)} for a in c.agents],
            "problems": [p.id for p in problems], "directions": list(c.directions), "replicates": c.replicates,
            "budget": [c.budget.minutes, c.budget.submissions], "verifier": [c.verifier_backend, c.verifier_protocol],
        }  # fmt: skip
        measured.update({k: v for k, v in (("filter", c.filter), ("controls", list(c.controls))) if v})
        parts = fingerprint_parts([p.id for p in problems], c.protocol, _json(measured))
        # what CampaignStarted records of the file: its credentials (an agent's api_key, headers) left out
        return Plan(cid, without_credentials(_json(dict(c.raw))), parts, attempts)

    @contextmanager
    def execution(self, store: EventStore, executor: str, ray_address: str | None) -> Iterator[Execution]:
        c = self.config
        problems = {p.id: p for p in self.problems()}
        ledger = CostLedger.from_store(store, c.campaign_id, c.cost_cap_usd)
        # commands that cannot be isolated as configured: refused here, before anything is stored
        network = sandbox_isolation(c.sandbox)
        backend = getattr(self.scorers, "backend", None) or c.verifier_backend  # as the verifier resolved it
        stop: StopFlag
        dispatch: Executor
        if executor == "ray":  # refused before anything is stored
            _check_shippable(scorer_factory=self.scorers, client_factory=self.client_factory)
            cpus = attempt_cpus(c)
            connect_ray(ray_address, c.agents_at_once * cpus)
            writer = start_writer(str(store.path))
            stop = RemoteStop(writer)
            # the scorers go to the workers as they are (RayVerifiers: a pool actor limits the verifications);
            # each attempt charges a ledger of its own and sends it back
            runner = LlmRunner(c, problems, RemoteStore(writer), stop, self.scorers, self.client_factory, None,
                               backend)  # fmt: skip
            dispatch = RayExecutor(guarded(runner), c.agents_at_once * cpus, ray_address, str(store.path),
                                   writer=writer, task_cpus=cpus)  # fmt: skip
        else:
            stop = threading.Event()
            slots = c.gpu_verifier_slots or getattr(self.scorers, "count", None)
            if not isinstance(slots, int):  # a factory that does not say how many verifiers it runs
                slots = default_verifier_slots(c.verifier_backend or "cpu")
            limited = limit_scoring(self.scorers, ScoringSlots(slots))
            runner = LlmRunner(c, problems, store, stop, limited, self.client_factory, ledger, backend)
            dispatch = ThreadDispatch(guarded(runner), c.agents_at_once)

        def settle(outcome: AttemptOutcome) -> None:
            if isinstance(outcome.charges, CostLedger):
                ledger.add(outcome.charges)

        def report() -> tuple[dict[str, Any], list[str]]:
            costs = ledger.summary()
            lines = [
                f"cost ${costs['cost_usd']:.4f} over {costs['llm_calls']} LLM calls, {costs['tokens']} tokens"
                + (f"; {costs['unpriced_calls']} calls had no known price" if costs["unpriced_calls"] else ""),
                f"sandbox: isolated ({network.detail})" if network.isolated
                else f"sandbox: NOT isolated — {network.detail}",
            ]  # fmt: skip
            return {**costs, "network_isolated": network.isolated, "network_detail": network.detail}, lines

        yield Execution(
            dispatch, workers=c.agents_at_once, at_once=c.agents_at_once, live=True, stop=stop,
            budget={"minutes": c.budget.minutes, "submissions": c.budget.submissions},
            cap_reached=lambda: ledger.cap_reached, settle=settle, report=report,
        )  # fmt: skip


@dataclass(frozen=True)
class LlmRunner:
    """Runs one LLM attempt to its end wherever the executor puts it: a worker thread here, or a Ray task
    (this object is then shipped to the workers; its store, stop flag and scorers lead back to the head node).

    ``ledger`` None: each attempt charges a ledger of its own and hands it back (``AttemptOutcome.charges``).
    ``cores``: where the sandbox's ``cpus`` is a count, each running attempt's sandbox takes cores of its
    machine that no other attempt there holds, of this campaign or another (while there are enough). ``backend``:
    the verifier's; with ``[verifier] skip_unverifiable``, an attempt in a DSL it cannot run gets an
    ``Unscorable`` scorer (it ends as infra_error without asking its model).
    """

    config: LlmCampaignConfig
    problems: dict[str, Problem]
    store: EventLog
    stop: StopFlag
    scorer_factory: ScorerFactory
    client_factory: Callable[[ModelConfig], ModelClient]
    ledger: CostLedger | None
    backend: str | None = None
    cores: NodeCores = field(default_factory=NodeCores)

    def __call__(self, tasks: list[AttemptTask]) -> list[AttemptOutcome]:
        (task,) = tasks
        ledger = self.ledger or CostLedger()
        cpus = self.config.sandbox.cpus
        if not isinstance(cpus, int):  # an explicit core list is used as given
            outcome = self._run(task, self.config.sandbox, ledger)
        else:
            with self.cores.hold(cpus) as cores:
                outcome = self._run(task, dataclasses.replace(self.config.sandbox, cpus=cores), ledger)
        return [outcome if self.ledger else dataclasses.replace(outcome, charges=ledger)]

    def _run(self, task: AttemptTask, sandbox: SandboxConfig, ledger: CostLedger) -> AttemptOutcome:
        c, a = self.config, task.attempt
        finish = _close_unfinished(self.store, a.attempt_id)
        if finish is not None and finish["status"] == "finished":  # a Ray task rerun after its attempt ended
            return _outcome_of(a.attempt_id, finish, recorded_skill(self.store, a.attempt_id))
        agent = next(m for m in c.agents if m.label == a.model)
        problem = self.problems[a.problem]
        spec = AttemptSpec(
            a.attempt_id, task.campaign_id, problem, a.dsl, a.arm, a.replicate,  # type: ignore[arg-type]
            source_attempt_id=task.source_attempt_id, skill=task.skill, filter=a.filter, chain_id=a.chain_id,
            hop=a.hop, extra=task.read_fields(),
        )  # fmt: skip
        return run_attempt(
            self.store, spec, agent, self._scorer(problem, a.dsl), sandbox=sandbox, budget=c.budget,
            loop=c.loop, ledger=ledger, client_factory=self.client_factory, stop=self.stop,
        )  # fmt: skip

    def _scorer(self, problem: Problem, dsl: str) -> Scorer:
        why = unscorable(self.backend, dsl) if self.config.skip_unverifiable else None
        return Unscorable(why) if why else self.scorer_factory(problem, dsl)


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


def _outcome_of(attempt_id: str, finish: dict[str, Any], skill: str | None) -> AttemptOutcome:
    return AttemptOutcome(
        attempt_id=attempt_id, status=finish["status"], passed=finish["passed"], runtime_ms=finish["runtime_ms"],
        speedup=finish["speedup"], skipped=finish["skipped"], reason=finish.get("reason"), skill=skill,
        counted_submissions=finish.get("counted_submissions", 0), tokens=finish.get("tokens", 0),
        cost_usd=finish.get("cost_usd", 0.0), network_isolated=finish.get("network_isolated", False),
        infra_stall_s=finish.get("infra_stall_s", 0.0),
    )  # fmt: skip


def _json(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` as JSON holds it (a TOML date, a path: their text)."""
    out: dict[str, Any] = json.loads(json.dumps(value, default=str))
    return out


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
