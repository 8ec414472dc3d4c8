"""Trajectory queries: an attempt's stream (a few dozen to a few hundred events), decoded and upcast, as
the steps a replay shows and the labels stored about it (DESIGN §3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mkbsim.events import attempt_stream
from mkbsim.lab._reader import Queries

#: Event types shown as steps of a trajectory (labels are annotations about it, not steps).
STEP_TYPES = frozenset(
    {"AttemptStarted", "AgentStep", "SkillRead", "SubmissionMade", "VerifierResult", "SkillWritten", "AttemptFinished"}
)


@dataclass(frozen=True)
class TrajectoryEvent:
    version: int
    type: str
    payload: dict[str, Any]
    #: the agent's clock (seconds since its start) at this event: an AgentStep's own, else the last one's
    clock_s: float


@dataclass
class Trajectory:
    attempt_id: str
    events: list[TrajectoryEvent]
    started: dict[str, Any] | None = None
    finished: dict[str, Any] | None = None
    skill_read: dict[str, Any] | None = None
    #: LabelAssigned labels on this attempt's stream, by subject ("skill", "comparison", ...), latest wins
    labels: dict[str, dict[str, Any]] = field(default_factory=dict)


class TrajectoryQueries(Queries):
    def load(self, attempt_id: str | None) -> Trajectory | None:
        """The attempt's steps and labels; None when there is no such attempt."""
        if attempt_id is None:
            return None
        events = self.store.read_stream(attempt_stream(attempt_id))
        if not events:
            return None
        trajectory = Trajectory(attempt_id, [])
        clock = 0.0
        for event in events:
            payload = event.payload
            if event.type == "LabelAssigned":
                trajectory.labels[str(payload.get("subject"))] = payload.get("labels") or {}
                continue
            if event.type not in STEP_TYPES:
                continue  # unknown types are preserved in the store and skipped here (DESIGN §3)
            if event.type == "AgentStep":
                clock = max(clock, float(payload.get("elapsed_s") or 0.0))
            elif event.type == "AttemptStarted":
                trajectory.started = payload
            elif event.type == "AttemptFinished":
                trajectory.finished = payload
            elif event.type == "SkillRead":
                trajectory.skill_read = payload
            trajectory.events.append(TrajectoryEvent(event.version, event.type, payload, clock))
        return trajectory
