"""One attempt as the campaign lifecycle sees it (DESIGN §4): the plan's entry, the task a runner gets
once what it reads is known, the outcome it hands back, and the ``AttemptRunner`` protocol that the
simulated runner (``mkbsim.simulator.SimulatedRunner``) and the LLM runner (``mkbsim.agents.LlmRunner``)
implement.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from mkbsim.events import AttemptFinished, AttemptStarted, NewEvent, attempt_stream
from mkbsim.events._types import AttemptStatus

#: The study's budget per attempt (DESIGN §4), as ``AttemptStarted`` records it.
STUDY_BUDGET: Mapping[str, int] = {"minutes": 40, "submissions": 10}


@dataclass(frozen=True)
class PlannedAttempt:
    """One attempt of a campaign plan: who attempts which problem, in which DSL and arm, and what it reads.

    ``source``: the attempt whose skill decides what it reads — a treatment's source solo, a chain hop's
    previous hop, a placebo's or matched control's own source solo (it is skipped, like its treatment, when
    that solo left no skill). ``donors``: a placebo's candidate skills, (problem, solo) of the family's other
    problems in a seeded order; it reads the first that left one. ``neutral_note``: a matched control reads a
    non-informative note as long as its source's skill instead of the skill. ``baseline``: the attempt it is
    compared with; recorded in ``AttemptStarted`` only where pairing could not find it in the slot
    (``names_baseline``: re-runs of another campaign's treatments, chain hops).
    """

    attempt_id: str
    model: str
    problem: str
    family: str
    dsl: str
    arm: str
    replicate: int
    seed: int = 0  # the simulated agent's draws; an LLM attempt has none
    source: str | None = None
    donors: tuple[tuple[str, str], ...] = ()
    neutral_note: bool = False
    baseline: str | None = None
    names_baseline: bool = False
    filter: str | None = None
    chain_id: str | None = None
    hop: int | None = None

    @property
    def depends_on(self) -> tuple[str, ...]:
        """The attempts that must have finished before this one can start (what it reads)."""
        return tuple(a for a in (self.source, *(d for _, d in self.donors)) if a is not None)


@dataclass(frozen=True)
class SkillText:
    """A finished attempt's skill as a reader receives it: the text (None: it left none), and its sentences'
    true rubric categories where the writer's ground truth is recorded (simulated attempts)."""

    text: str | None
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AttemptTask:
    """A planned attempt ready to run: what a runner receives.

    ``skill``: the text it reads (None: it reads nothing); runners show it under the neutral header.
    ``source_attempt_id``: whose skill that is (a placebo: the other problem's solo; a matched control: the solo
    whose skill's length the note has). ``source_problem``: the problem a placebo's skill was written for.
    ``source_labels``: the true categories of the read sentences (simulated attempts repeat them with their
    category).
    """

    campaign_id: str
    attempt: PlannedAttempt
    skill: str | None = None
    source_attempt_id: str | None = None
    source_problem: str | None = None
    source_labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def attempt_id(self) -> str:
        return self.attempt.attempt_id

    def started(self, budget: Mapping[str, Any] = STUDY_BUDGET) -> dict[str, Any]:
        """The ``AttemptStarted`` payload (runners add their own fields to it)."""
        a = self.attempt
        payload = AttemptStarted(
            attempt_id=a.attempt_id, campaign_id=self.campaign_id, model=a.model, problem=a.problem,
            family=a.family, dsl=a.dsl, arm=a.arm, replicate=a.replicate,  # type: ignore[arg-type]
            budget=dict(budget), source_attempt_id=self.source_attempt_id, chain_id=a.chain_id, hop=a.hop,
            filter=a.filter, baseline_attempt_id=a.baseline if a.names_baseline else None,
        ).to_dict()  # fmt: skip
        payload.update(self.read_fields())
        return payload

    def read_fields(self) -> dict[str, Any]:
        """Fields a control arm adds to ``AttemptStarted`` and ``SkillRead`` (DESIGN §3 allows adding fields):
        which problem a placebo's skill was written for; that a matched control read a neutral note."""
        out: dict[str, Any] = {}
        if self.source_problem is not None:
            out["source_problem"] = self.source_problem
        if self.attempt.neutral_note and self.skill is not None:
            out["neutral_note"] = True
        return out


@dataclass(frozen=True)
class AttemptOutcome:
    """How an attempt ended (its latest try): the ``AttemptFinished`` fields, the skill it wrote, and what it
    cost. ``events``: the attempt's events for the campaign's recorder to append — empty where the runner
    appended them as they happened (LLM attempts, so that monitors see them live). ``charges``: the cost of
    its model calls where the campaign's ledger is not shared with the runner (a Ray task's), for the
    execution to settle."""

    attempt_id: str
    status: AttemptStatus
    passed: bool
    runtime_ms: float | None
    speedup: float | None
    skipped: bool
    reason: str | None
    skill: str | None
    skill_labels: Mapping[str, str] = field(default_factory=dict)
    counted_submissions: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    network_isolated: bool = False
    network_detail: str = ""
    infra_stall_s: float = 0.0
    events: tuple[NewEvent, ...] = ()
    charges: object | None = None


class AttemptRunner(Protocol):
    """Runs tasks to their ends, in a worker of the campaign's executor (a process, a thread or a Ray task),
    and returns one outcome per task in order. An attempt that fails on infrastructure — or on a fault of the
    runner itself — ends ``infra_error`` (a resume runs it again); only a fault that must stop the campaign
    (the store failed) is raised. A runner that records as it goes raises ``KeyboardInterrupt`` after
    recording its attempt ``interrupted`` when the campaign's stop flag is set."""

    def __call__(self, tasks: list[AttemptTask]) -> list[AttemptOutcome]: ...


def skipped(task: AttemptTask, reason: str, budget: Mapping[str, Any] = STUDY_BUDGET) -> AttemptOutcome:
    """A skill-conditioned attempt with nothing to read (DESIGN §4): recorded as started and finished
    ``skipped``, it inherits the baseline's outcome in the metrics."""
    stream = attempt_stream(task.attempt_id)
    end = AttemptFinished(attempt_id=task.attempt_id, status="finished", passed=False, runtime_ms=None,
                          speedup=None, skipped=True, reason=reason)  # fmt: skip
    events = (NewEvent(stream, AttemptStarted.TYPE, task.started(budget)), NewEvent.of(stream, end))
    return AttemptOutcome(task.attempt_id, "finished", False, None, None, True, reason, None, events=events)


def interrupted(task: AttemptTask, why: str, budget: Mapping[str, Any] = STUDY_BUDGET) -> tuple[NewEvent, ...]:
    """The events of a try stopped before its runner handed it back (it runs again when the campaign resumes)."""
    stream = attempt_stream(task.attempt_id)
    end = AttemptFinished(attempt_id=task.attempt_id, status="interrupted", passed=False, runtime_ms=None,
                          speedup=None, skipped=False, reason=why)  # fmt: skip
    return NewEvent(stream, AttemptStarted.TYPE, task.started(budget)), NewEvent.of(stream, end)


@dataclass(frozen=True)
class SkillTransform:
    """A named text → text transformation of every transferred skill (a campaign's ``filter``): the
    command line resolves the name (``mkbsim.plugins.get_filter``, by entry point): mkbsim never imports the plugins."""

    name: str
    apply: Callable[[str], str]
