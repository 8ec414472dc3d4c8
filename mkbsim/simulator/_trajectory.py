"""An attempt's events as it runs (DESIGN §3), on the attempt's stream, timed by the simulated clock."""

from __future__ import annotations

import hashlib
from typing import Any

from mkbsim.events import (
    AgentStep,
    LabelAssigned,
    NewEvent,
    Payload,
    SubmissionMade,
    VerifierResult,
    attempt_stream,
)
from mkbsim.simulator._scoring import BACKEND, PROTOCOL, AnalyticVerdict

ENV = {"simulator": "mkbsim.simulator", "device": "h200"}
_TOKENS_PER_CHAR = 0.3
_PROMPT_TOKENS = 900  # context re-sent with every model call


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class TrajectoryWriter:
    def __init__(self, attempt_id: str) -> None:
        self.attempt_id = attempt_id
        self.stream = attempt_stream(attempt_id)
        self.events: list[NewEvent] = []
        self._step = 0

    def add(self, payload: Payload, **extra: Any) -> None:
        """Append an event; ``extra`` adds fields beyond the core schema (allowed: DESIGN §3)."""
        event = NewEvent.of(self.stream, payload)
        if extra:
            event.payload.update(extra)
        self.events.append(event)

    def add_raw(self, type_: str, payload: dict[str, Any]) -> None:
        """Append an event whose payload is already a dict (``AttemptTask.started``)."""
        self.events.append(NewEvent(self.stream, type_, payload))

    def step(self, kind: str, content: str, elapsed_s: float) -> None:
        tokens = _PROMPT_TOKENS + int(len(content) / _TOKENS_PER_CHAR) if kind == "llm" else None
        # the ``AgentStep`` payload as a dict, in its fields' order: two thirds of a simulated campaign's events are
        # steps, and building the dataclass to turn it into this dict costs more than simulating the step
        payload = {"attempt_id": self.attempt_id, "step": self._step, "kind": kind, "content": content,
                   "elapsed_s": round(elapsed_s, 1), "tokens": tokens, "cost_usd": None}  # fmt: skip
        self.events.append(NewEvent(self.stream, AgentStep.TYPE, payload))
        self._step += 1

    def submission(self, number: int, code: str) -> None:
        self.add(SubmissionMade(attempt_id=self.attempt_id, submission=number, counted=True,
                                code_sha256=sha256(code), code=code))  # fmt: skip

    def verdict(self, submission: int | str, v: AnalyticVerdict, details: dict[str, Any]) -> None:
        self.add(
            VerifierResult(
                attempt_id=self.attempt_id, submission=submission,  # type: ignore[arg-type]
                backend=BACKEND, protocol=PROTOCOL, passed=v.passed, correct=v.passed or v.failure == "not_dsl",
                runtime_ms=v.runtime_ms, eager_ms=v.eager_ms, speedup=v.speedup,
                bypass_ok=v.failure != "not_dsl", forbidden=[], inline_cuda=False, failure=v.failure,
                details=details, env=ENV,
            )
        )  # fmt: skip

    def label(self, subject: str, labels: dict[str, Any]) -> None:
        self.add(LabelAssigned(subject=subject, subject_id=self.attempt_id, labeler="ground_truth", labels=labels))  # type: ignore[arg-type]
