"""A sequential LLM campaign: for each agent, problem and replicate, both solo attempts, then the
skill-conditioned attempt of each configured direction.

Attempt ids are deterministic, so running the same campaign file again resumes it: attempts that
finished are kept, attempts that ended on infrastructure (or never finished) run again under
their id, and a treatment runs once its source has finished. The cost cap stops new attempts.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mkbsim.agents._attempt import AttemptOutcome, AttemptSpec, run_attempt
from mkbsim.agents._config import LlmCampaignConfig
from mkbsim.agents._ledger import CostLedger
from mkbsim.agents._model import ModelClient, ModelConfig
from mkbsim.agents._sandbox import detect_network_isolation
from mkbsim.agents._scoring import ScorerFactory
from mkbsim.agents._transfer import DIRECTIONS, attempt_id_for, latest_finish, run_treatment, skill_arm, solo_arm
from mkbsim.campaigns._signals import InterruptOnSignals
from mkbsim.catalog import Catalog, Problem
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
    return hashlib.sha256(json.dumps(plan, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _begin(store: EventStore, config: LlmCampaignConfig, fingerprint: str) -> None:
    from mkbsim import __version__

    stream = campaign_stream(config.campaign_id)
    started = [e for e in store.read_stream(stream) if e.type == CampaignStarted.TYPE]
    if started:
        if started[0].payload["plan_fingerprint"] != fingerprint:
            raise UserError(
                f"campaign {config.campaign_id!r} already exists in {store.path} with a different plan "
                "(agents, problems, directions, replicates, budget or verifier changed); use a new campaign id"
            )
        return
    payload = CampaignStarted(
        campaign_id=config.campaign_id, config=json.loads(json.dumps(dict(config.raw), default=str)),
        plan_fingerprint=fingerprint, code_version=__version__,
    )  # fmt: skip
    store.append([NewEvent.of(stream, payload)], expected_version=0)


def _close_unfinished(store: EventStore, attempt_id: str) -> None:
    """A try that never recorded its end (the process died) is closed as interrupted before rerunning."""
    stream = store.read_stream(attempt_stream(attempt_id))
    if stream and latest_finish(store, attempt_id) is None:
        finished = AttemptFinished(
            attempt_id=attempt_id, status="interrupted", passed=False, runtime_ms=None, speedup=None,
            skipped=False, reason="no end was recorded (the run was killed); rerun",
        )  # fmt: skip
        store.append([NewEvent.of(attempt_stream(attempt_id), finished)], expected_version=len(stream))


class _CampaignRun:
    def __init__(
        self,
        config: LlmCampaignConfig,
        store: EventStore,
        scorer_factory: ScorerFactory,
        client_factory: Callable[[ModelConfig], ModelClient],
        progress: Callable[[str], None],
    ) -> None:
        self.config, self.store, self.scorer_factory = config, store, scorer_factory
        self.client_factory, self.progress = client_factory, progress
        self.ledger = CostLedger.from_store(store, config.campaign_id, config.cost_cap_usd)
        network = detect_network_isolation()
        self.summary = CampaignSummary(
            config.campaign_id, network_isolated=network.isolated, network_detail=network.detail
        )

    def _record(self, outcome: AttemptOutcome, reused: bool) -> None:
        s = self.summary
        s.statuses[outcome.status] += 1
        s.passed += outcome.passed
        s.skipped += outcome.skipped
        s.reused += reused
        flag = "passed" if outcome.passed else "skipped" if outcome.skipped else "failed"
        self.progress(f"{outcome.attempt_id}: {outcome.status}, {flag}" + (" (kept)" if reused else ""))

    def _finished(self, attempt_id: str) -> dict[str, Any] | None:
        finish = latest_finish(self.store, attempt_id)
        return finish if finish is not None and finish["status"] == "finished" else None

    def _ensure(self, attempt_id: str, run: Callable[[], AttemptOutcome]) -> None:
        """Keep a finished attempt, else run it (unless the cost cap stops new attempts)."""
        finish = self._finished(attempt_id)
        if finish is not None:
            self._record(_outcome_of(attempt_id, finish), reused=True)
            return
        if self.ledger.cap_reached:
            self.summary.stopped_by_cost_cap = True
            return
        _close_unfinished(self.store, attempt_id)
        self.progress(f"{attempt_id}: running")
        self._record(run(), reused=False)

    def solo(self, agent: ModelConfig, problem: Problem, replicate: int, dsl: Dsl) -> None:
        c = self.config
        spec = AttemptSpec(
            attempt_id_for(c.campaign_id, agent.label, problem.id, solo_arm(dsl), replicate),
            c.campaign_id, problem, dsl, solo_arm(dsl), replicate,
        )  # fmt: skip
        self._ensure(spec.attempt_id, lambda: run_attempt(
            self.store, spec, agent, self.scorer_factory(problem, dsl), sandbox=c.sandbox, budget=c.budget,
            loop=c.loop, ledger=self.ledger, client_factory=self.client_factory,
        ))  # fmt: skip

    def treatment(self, agent: ModelConfig, problem: Problem, replicate: int, direction: str) -> None:
        c = self.config
        source_arm = solo_arm(DIRECTIONS[direction][0])
        source_id = attempt_id_for(c.campaign_id, agent.label, problem.id, source_arm, replicate)
        if self._finished(source_id) is None:
            return  # the source ended on infrastructure (or the cap stopped it): a resume runs both
        attempt_id = attempt_id_for(c.campaign_id, agent.label, problem.id, skill_arm(direction), replicate)
        self._ensure(attempt_id, lambda: run_treatment(
            self.store, attempt_id=attempt_id, source_attempt_id=source_id, campaign_id=c.campaign_id,
            problem=problem, direction=direction, model=agent, scorer_factory=self.scorer_factory,
            sandbox=c.sandbox, replicate=replicate, budget=c.budget, loop=c.loop, ledger=self.ledger,
            client_factory=self.client_factory,
        ))  # fmt: skip


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
) -> CampaignSummary:
    """Run (or resume) the campaign; returns its summary, also stored as ``CampaignFinished``."""
    try:
        problems = catalog.select(config.problems)
    except KeyError as exc:
        raise UserError(f"{config.path}: campaign.problems: {exc.args[0]}") from None
    _begin(store, config, plan_fingerprint(config, problems))
    run = _CampaignRun(config, store, scorer_factory, client_factory, progress)
    with InterruptOnSignals():  # SIGTERM too ends the attempt in flight as interrupted (run_attempt records it)
        for agent in config.agents:
            for problem in problems:
                for replicate in range(config.replicates):
                    # both solos: each is one direction's source and the other's baseline
                    for dsl in ("cutedsl", "tirx"):
                        run.solo(agent, problem, replicate, dsl)
                    for direction in config.directions:
                        run.treatment(agent, problem, replicate, direction)
    summary = run.summary
    summary.costs = run.ledger.summary()
    finished = CampaignFinished(campaign_id=config.campaign_id, counts=summary.counts())
    store.append([NewEvent.of(campaign_stream(config.campaign_id), finished)])
    return summary
