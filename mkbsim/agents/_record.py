"""Appends one attempt's events as they happen, so monitors see the attempt live.

Each append names the stream version it expects: a second process running the same attempt id
(two resumes at once) fails with ``ConcurrencyError`` instead of interleaving two trajectories.
``AgentStep`` payloads carry extra fields (DESIGN §3 allows adding fields) that make the
trajectory replayable: the role of each message, the exact requests of summary calls, command
exit codes and outputs.
"""

from __future__ import annotations

import time
from typing import Any

from mkbsim.events import AgentStep, EventLog, NewEvent, Payload, attempt_stream
from mkbsim.events._types import StepKind


class AttemptRecorder:
    def __init__(self, store: EventLog, attempt_id: str) -> None:
        self.store = store
        self.attempt_id = attempt_id
        self.stream = attempt_stream(attempt_id)
        self.version = len(store.read_stream(self.stream))
        self.steps = 0
        self.started = time.monotonic()

    def elapsed_s(self) -> float:
        return round(time.monotonic() - self.started, 3)

    def append(self, *payloads: Payload | tuple[str, dict[str, Any]]) -> None:
        """Append typed payloads, or (type, dict) pairs for payloads with extra fields, in one batch."""
        events = [
            NewEvent(self.stream, p[0], p[1]) if isinstance(p, tuple) else NewEvent.of(self.stream, p) for p in payloads
        ]
        self.store.append(events, expected_version=self.version)
        self.version += len(events)

    def step(
        self,
        kind: StepKind,
        content: str,
        *,
        tokens: int | None = None,
        cost_usd: float | None = None,
        **extra: Any,
    ) -> int:
        """Record an ``AgentStep``; returns its step number (0, 1, ...)."""
        number = self.steps
        self.steps += 1
        base = AgentStep(
            attempt_id=self.attempt_id, step=number, kind=kind, content=content,
            elapsed_s=self.elapsed_s(), tokens=tokens, cost_usd=cost_usd,
        ).to_dict()  # fmt: skip
        self.append((AgentStep.TYPE, {**base, **extra}))
        return number
