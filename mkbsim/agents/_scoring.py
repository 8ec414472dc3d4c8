"""What the agent loop needs from a verifier: a ``Scorer`` turns a kernel file into a verdict.

The loop never imports the verifier itself; a campaign hands it a scorer per (problem, DSL). The
real ones come from ``VerifierScorers`` (DESIGN §5).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from mkbsim.catalog import Problem
    from mkbsim.verifier import Protocol as VerifierProtocol
    from mkbsim.verifier import VerifierSession

SubmissionIndex = int | Literal["final"]


@dataclass(frozen=True)
class Verdict:
    """A ``VerifierResult`` payload (DESIGN §3) and the feedback text shown to the agent."""

    payload: dict[str, Any]
    feedback: str

    @property
    def passed(self) -> bool:
        return bool(self.payload.get("passed"))

    @property
    def infra_error(self) -> bool:
        """The verifier failed, not the submission: such a submission is not counted."""
        return self.payload.get("failure") == "infra_error"


class Scorer(Protocol):
    def score(self, kernel_path: Path, *, attempt_id: str, submission: SubmissionIndex) -> Verdict:
        """Verify the kernel file; the payload names ``attempt_id`` and ``submission``."""
        ...


#: Makes the scorer for one attempt's (problem, DSL).
ScorerFactory = Callable[["Problem", str], Scorer]


def unscorable(backend: str | None, dsl: str) -> str | None:
    """Why a verifier on ``backend`` can verify no ``dsl`` kernel at all, or None (DESIGN §5: CuTe DSL runs on
    the cuda backend only; None is a backend not resolved yet, which may be cuda)."""
    if dsl == "cutedsl" and backend is not None and backend != "cuda":
        return f'the {backend} verifier cannot run CuTe DSL kernels (verifier.backend = "cuda" on a GPU machine)'
    return None


@dataclass(frozen=True)
class Unscorable:
    """The scorer of an attempt whose kernels the campaign's verifier cannot run (``unscorable``): the attempt
    ends as ``infra_error`` before its model is asked, since no verdict of it could be anything else (a resume
    on a machine that can verify it runs it again)."""

    reason: str

    def score(self, kernel_path: Path, *, attempt_id: str, submission: SubmissionIndex) -> Verdict:
        raise RuntimeError(self.reason)


class VerifierScorers:
    """A ``ScorerFactory`` backed by the project's verifier (``mkbsim.verifier``).

    One verifier session serves every scorer it makes, so its worker processes are started once
    per campaign, not once per submission. ``backend`` None picks the verifier's default (cuda
    where a GPU is visible, else cpu). Close it when the campaign ends. Threads may share it: the
    session verifies one submission at a time (``VerifierSlots`` runs several at once).
    """

    def __init__(self, backend: str | None = None, protocol: str | VerifierProtocol = "paper") -> None:
        self.backend = backend
        self.protocol = protocol
        self._session: VerifierSession | None = None
        self.lock = threading.RLock()

    def session(self) -> VerifierSession:
        with self.lock:
            if self._session is None:
                from mkbsim.verifier import VerifierSession

                self._session = VerifierSession(self.backend)
            return self._session

    def __call__(self, problem: Problem, dsl: str) -> Scorer:
        return _SessionScorer(self, problem, dsl)

    def close(self) -> None:
        with self.lock:
            if self._session is not None:
                self._session.close()
                self._session = None

    def __enter__(self) -> VerifierScorers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class _SessionScorer:
    owner: VerifierScorers
    problem: Problem
    dsl: str

    def score(self, kernel_path: Path, *, attempt_id: str, submission: SubmissionIndex) -> Verdict:
        with self.owner.lock:  # one session, one verification at a time (its zygote and caches are not shared)
            report = self.owner.session().verify(kernel_path, self.problem, self.dsl, protocol=self.owner.protocol)
        return Verdict(report.to_payload(attempt_id, submission), "\n".join(report.verdict_lines()))
