"""One warm verifier session (one zygote) shared by the CPU tests of the verifier."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import mkbsim.verifier
from mkbsim.verifier import Limits, VerifierSession

# Short call timeout and a small memory budget: the infinite loop and the memory bomb fail fast.
# The bomb needs its 2 GiB written before the timeout: ~2.5 s single-threaded on a 2-core machine
# loaded 3x past its cores, so 3 s turned it into a timeout there.
TEST_LIMITS = Limits(call_timeout_s=8.0, import_timeout_s=120.0, memory_bytes=2 << 30)


@pytest.fixture(scope="session")
def cpu_session() -> Iterator[VerifierSession]:
    with VerifierSession("cpu", limits=TEST_LIMITS) as session:
        yield session


class _Borrowed:
    """The shared session as ``mkbsim verify`` opens and closes its own: its ``with`` leaves the zygote running."""

    def __init__(self, session: VerifierSession) -> None:
        self._session = session

    def __enter__(self) -> VerifierSession:
        return self._session

    def __exit__(self, *exc: object) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


@pytest.fixture
def cli_uses_cpu_session(cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch) -> VerifierSession:
    """``mkbsim verify --backend cpu`` run in-process verifies in ``cpu_session`` instead of a session of its own:
    a zygote start and the eager baselines (seconds each, none of what a rule test checks) once per worker, not
    once per call. The CLI's own session, default limits and all, is what ``test_cli_verify`` runs."""

    def borrowed(backend: str | None = None, **kwargs: Any) -> _Borrowed:
        assert backend == cpu_session.backend and not kwargs, (backend, kwargs)
        return _Borrowed(cpu_session)

    monkeypatch.setattr(mkbsim.verifier, "VerifierSession", borrowed)  # the CLI imports it from there when it runs
    return cpu_session
