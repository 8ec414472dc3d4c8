"""The core event types of DESIGN §3. Field names are a public format: add fields, never rename."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from mkbsim.events._schema import Payload, event_type

Arm = Literal[
    "solo_cutedsl", "solo_tirx", "cutedsl2tirx_skill", "tirx2cutedsl_skill",
    # control arms (DESIGN §4), optional per campaign
    "cutedsl2tirx_aa", "tirx2cutedsl_aa", "cutedsl2tirx_placebo", "tirx2cutedsl_placebo",
    "cutedsl2tirx_matched", "tirx2cutedsl_matched",
]  # fmt: skip
Dsl = Literal["cutedsl", "tirx"]
StepKind = Literal["llm", "command", "observation", "note"]
AttemptStatus = Literal["finished", "infra_error", "interrupted"]
PlanKind = Literal["full", "partial"]


@event_type
@dataclass(frozen=True)
class CampaignStarted(Payload):
    campaign_id: str
    config: dict[str, Any]
    plan_fingerprint: str
    code_version: str


@event_type
@dataclass(frozen=True)
class AttemptStarted(Payload):
    attempt_id: str
    campaign_id: str
    model: str
    problem: str
    family: str
    dsl: Dsl
    arm: Arm
    replicate: int
    budget: dict[str, Any]
    source_attempt_id: str | None = None
    chain_id: str | None = None
    hop: int | None = None
    filter: str | None = None
    #: a treatment re-run in another campaign (filter test) names the solo it is compared with
    baseline_attempt_id: str | None = None


@event_type
@dataclass(frozen=True)
class AgentStep(Payload):
    attempt_id: str
    step: int
    kind: StepKind
    content: str
    elapsed_s: float
    tokens: int | None = None
    cost_usd: float | None = None


@event_type
@dataclass(frozen=True)
class SubmissionMade(Payload):
    attempt_id: str
    submission: int
    counted: bool
    code_sha256: str
    code: str


@event_type
@dataclass(frozen=True)
class VerifierResult(Payload):
    attempt_id: str
    submission: int | Literal["final"]
    backend: str
    protocol: str
    passed: bool
    correct: bool
    runtime_ms: float | None
    eager_ms: float | None
    speedup: float | None
    bypass_ok: bool | None  # None: the bypass test did not run (an earlier check failed)
    forbidden: list[str]
    inline_cuda: bool
    failure: str | None
    details: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    #: full: the DSL's launches made the problem's products; partial: eager code made ``plan_eager_share`` of them
    #: (verifier README, "Plan kinds"); None where the verification stopped before the eager work was measured, or in
    #: results stored before plan kinds (and the simulator's, which has no eager code)
    plan: PlanKind | None = None
    plan_eager_share: float | None = None


@event_type
@dataclass(frozen=True)
class SkillWritten(Payload):
    attempt_id: str
    text: str
    sha256: str


@event_type
@dataclass(frozen=True)
class SkillRead(Payload):
    attempt_id: str
    source_attempt_id: str
    text: str
    sha256: str
    filter: str | None = None


@event_type
@dataclass(frozen=True)
class AttemptFinished(Payload):
    attempt_id: str
    status: AttemptStatus
    passed: bool
    runtime_ms: float | None
    speedup: float | None
    skipped: bool
    reason: str | None = None


@event_type
@dataclass(frozen=True)
class LabelAssigned(Payload):
    subject: Literal["skill", "comparison", "claim"]
    subject_id: str
    labeler: str
    labels: dict[str, Any]


@event_type
@dataclass(frozen=True)
class CampaignFinished(Payload):
    campaign_id: str
    counts: dict[str, Any]


def campaign_stream(campaign_id: str) -> str:
    return f"campaign-{campaign_id}"


def attempt_stream(attempt_id: str) -> str:
    return f"attempt-{attempt_id}"
