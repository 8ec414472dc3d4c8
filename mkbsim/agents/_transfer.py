"""Skill transfer by hand (DESIGN §4), outside any campaign: a solo attempt in the source DSL, then a fresh
attempt by the same model in the target DSL given only the source's skill, verbatim under the neutral header.
Campaigns (``mkbsim.campaigns.run_campaign`` with ``LlmCampaign``) transfer the same way: what a treatment
reads, and when it is skipped, is decided by one function, ``mkbsim.campaigns``' ``prepare``.

The treatment reads the skill from the store (the source's ``SkillWritten``), so it transfers exactly what
was recorded. The source's code and trajectory are withheld. A missing or empty skill — or one a filter
empties — skips the treatment: it is recorded as started and finished with ``skipped: true`` and inherits
the baseline outcome in the metrics.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mkbsim.agents._attempt import AttemptSpec, LoopConfig, run_attempt
from mkbsim.agents._conversation import current_try
from mkbsim.agents._ledger import CostLedger
from mkbsim.agents._model import ModelClient, ModelConfig
from mkbsim.agents._sandbox import SandboxConfig
from mkbsim.agents._scoring import ScorerFactory
from mkbsim.campaigns._attempt import AttemptOutcome, AttemptTask, PlannedAttempt, SkillText, SkillTransform, skipped
from mkbsim.campaigns._reading import prepare
from mkbsim.campaigns._signals import StopFlag
from mkbsim.catalog import Budget, Problem
from mkbsim.events import AttemptFinished, EventLog, attempt_stream
from mkbsim.events._types import Arm, Dsl

#: Direction name (source DSL → target DSL), as in DESIGN §4.
DIRECTIONS: dict[str, tuple[Dsl, Dsl]] = {"cutedsl2tirx": ("cutedsl", "tirx"), "tirx2cutedsl": ("tirx", "cutedsl")}


@dataclass(frozen=True)
class TransferPair:
    source: AttemptOutcome
    treatment: AttemptOutcome | None  # None: not started (source not finished, or the cost cap)


class SourceNotFinished(ValueError):
    """The source attempt has no finished outcome (it failed on infrastructure or never ran)."""


def _dsls(direction: str) -> tuple[Dsl, Dsl]:
    try:
        return DIRECTIONS[direction]
    except KeyError:
        raise ValueError(f"unknown direction {direction!r}; use one of {', '.join(DIRECTIONS)}") from None


def solo_arm(dsl: Dsl) -> Arm:
    return "solo_cutedsl" if dsl == "cutedsl" else "solo_tirx"


def skill_arm(direction: str) -> Arm:
    return "cutedsl2tirx_skill" if direction == "cutedsl2tirx" else "tirx2cutedsl_skill"


def attempt_id_for(campaign_id: str, agent: str, problem: str, arm: str, replicate: int) -> str:
    """A deterministic attempt id, so that a resume finds the attempts of an earlier run."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", agent).strip("-")
    return f"{campaign_id}.{slug}.{problem}.{arm}.r{replicate}"


def latest_finish(store: EventLog, attempt_id: str) -> dict[str, Any] | None:
    """The ``AttemptFinished`` payload of the attempt's latest try, or None if it has not finished."""
    events = current_try(store.read_stream(attempt_stream(attempt_id)))
    finished = [e.payload for e in events if e.type == AttemptFinished.TYPE]
    return finished[-1] if finished else None


def recorded_skill(store: EventLog, attempt_id: str) -> str | None:
    """The skill the attempt's latest try wrote, or None."""
    events = current_try(store.read_stream(attempt_stream(attempt_id)))
    texts = [e.payload["text"] for e in events if e.type == "SkillWritten"]
    return texts[-1] if texts else None


def run_treatment(
    store: EventLog,
    *,
    attempt_id: str,
    source_attempt_id: str,
    campaign_id: str,
    problem: Problem,
    direction: str,
    model: ModelConfig,
    scorer_factory: ScorerFactory,
    sandbox: SandboxConfig,
    replicate: int = 0,
    budget: Budget | None = None,
    loop: LoopConfig | None = None,
    ledger: CostLedger | None = None,
    skill_filter: SkillTransform | None = None,
    client_factory: Callable[[ModelConfig], ModelClient] = ModelClient,
    stop: StopFlag | None = None,
) -> AttemptOutcome:
    """The skill-conditioned attempt of ``direction`` given the recorded skill of its source."""
    _, target_dsl = _dsls(direction)
    finish = latest_finish(store, source_attempt_id)
    if finish is None or finish["status"] != "finished":
        state = "has not run" if finish is None else f"ended as {finish['status']}"
        raise SourceNotFinished(f"source attempt {source_attempt_id} {state}")
    planned = PlannedAttempt(
        attempt_id,
        model.label,
        problem.id,
        problem.family,
        target_dsl,
        skill_arm(direction),
        replicate,
        source=source_attempt_id,
        filter=skill_filter.name if skill_filter else None,
    )
    budget = budget or Budget()
    skills = {source_attempt_id: SkillText(recorded_skill(store, source_attempt_id))}
    task = prepare(campaign_id, planned, skills, skill_filter)
    if isinstance(task, str):
        outcome = skipped(AttemptTask(campaign_id, planned, source_attempt_id=source_attempt_id), task,
                          {"minutes": budget.minutes, "submissions": budget.submissions})  # fmt: skip
        store.append(list(outcome.events), expected_version=len(store.read_stream(attempt_stream(attempt_id))))
        return outcome
    spec = AttemptSpec(attempt_id, campaign_id, problem, target_dsl, planned.arm, replicate,  # type: ignore[arg-type]
                       source_attempt_id=source_attempt_id, skill=task.skill, filter=planned.filter)  # fmt: skip
    return run_attempt(
        store, spec, model, scorer_factory(problem, target_dsl), sandbox=sandbox, budget=budget, loop=loop,
        ledger=ledger, client_factory=client_factory, stop=stop,
    )  # fmt: skip


def run_transfer_pair(
    store: EventLog,
    *,
    campaign_id: str,
    problem: Problem,
    direction: str,
    model: ModelConfig,
    scorer_factory: ScorerFactory,
    sandbox: SandboxConfig,
    replicate: int = 0,
    budget: Budget | None = None,
    loop: LoopConfig | None = None,
    ledger: CostLedger | None = None,
    skill_filter: SkillTransform | None = None,
    client_factory: Callable[[ModelConfig], ModelClient] = ModelClient,
) -> TransferPair:
    """The source solo attempt of ``direction``, then its skill-conditioned treatment.

    The treatment is not started when the source ended on infrastructure (a resume reruns both)
    or when ``ledger``'s cost cap was reached during the source.
    """
    source_dsl, _ = _dsls(direction)
    ledger = ledger or CostLedger()
    source_id = attempt_id_for(campaign_id, model.label, problem.id, solo_arm(source_dsl), replicate)
    source = run_attempt(
        store,
        AttemptSpec(source_id, campaign_id, problem, source_dsl, solo_arm(source_dsl), replicate),
        model, scorer_factory(problem, source_dsl), sandbox=sandbox, budget=budget, loop=loop, ledger=ledger,
        client_factory=client_factory,
    )  # fmt: skip
    if source.status != "finished" or ledger.cap_reached:
        return TransferPair(source, None)
    treatment = run_treatment(
        store, attempt_id=attempt_id_for(campaign_id, model.label, problem.id, skill_arm(direction), replicate),
        source_attempt_id=source_id, campaign_id=campaign_id, problem=problem, direction=direction, model=model,
        scorer_factory=scorer_factory, sandbox=sandbox, replicate=replicate, budget=budget, loop=loop, ledger=ledger,
        skill_filter=skill_filter, client_factory=client_factory,
    )  # fmt: skip
    return TransferPair(source, treatment)
