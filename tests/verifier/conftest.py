"""One warm verifier session (one zygote) shared by the CPU tests of the verifier."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mkbsim.verifier import Limits, VerifierSession

# Short call timeout and a small memory budget: the infinite loop and the memory bomb fail fast.
# The bomb needs its 2 GiB written before the timeout: ~2.5 s single-threaded on a 2-core machine
# loaded 3x past its cores, so 3 s turned it into a timeout there.
TEST_LIMITS = Limits(call_timeout_s=8.0, import_timeout_s=120.0, memory_bytes=2 << 30)


@pytest.fixture(scope="session")
def cpu_session() -> Iterator[VerifierSession]:
    with VerifierSession("cpu", limits=TEST_LIMITS) as session:
        yield session
