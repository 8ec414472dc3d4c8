"""The verifier (DESIGN §5): the single source of truth for correctness and speed.

    from mkbsim.verifier import VerifierSession
    with VerifierSession("cpu") as session:
        report = session.verify("kernel.py", "p36", "tirx", protocol="paper")
    payload = report.to_payload(attempt_id, submission=3)   # the VerifierResult event

`verify(...)` does the same for one submission. Importing this package is light: torch is loaded
only when a session is used. The worker side (zygote, guards, hooks) needs only torch, numpy and
the DSLs, so it runs on bare GPU machines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mkbsim.verifier._protocol import HARDENED, PAPER, PROTOCOLS, Limits, Protocol, resolve_protocol
from mkbsim.verifier._result import FAILURES, VerifierReport

if TYPE_CHECKING:
    from mkbsim.verifier._session import VerifierSession, default_backend, verify

__all__ = [
    "FAILURES",
    "HARDENED",
    "PAPER",
    "PROTOCOLS",
    "Limits",
    "Protocol",
    "VerifierReport",
    "VerifierSession",
    "default_backend",
    "resolve_protocol",
    "verify",
]

_LAZY = ("VerifierSession", "default_backend", "verify")


def __getattr__(name: str) -> Any:
    # The session imports torch and the catalogue; the worker process must not import either
    # merely because it lives in this package.
    if name in _LAZY:
        from mkbsim.verifier import _session

        return getattr(_session, name)
    raise AttributeError(f"module 'mkbsim.verifier' has no attribute {name!r}")
