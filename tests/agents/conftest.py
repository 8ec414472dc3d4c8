"""Fixtures of the agent tests: the stub LLM server, the verifier on its CPU backend, a store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_kit import StubLLM, serve

from mkbsim.agents import SandboxConfig, VerifierScorers
from mkbsim.catalog import Problem, load_catalog
from mkbsim.events import EventStore


@pytest.fixture
def stub() -> Iterator[StubLLM]:
    with serve(StubLLM()) as running:
        yield running


@pytest.fixture(scope="session")
def scorers() -> Iterator[VerifierScorers]:
    """The real verifier on the CPU backend, one session for the whole test run."""
    with VerifierScorers("cpu") as factory:
        yield factory


@pytest.fixture(scope="session")
def p36() -> Problem:
    return load_catalog().get("p36")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventStore]:
    with EventStore(tmp_path / "events.sqlite", create=True) as s:
        yield s


@pytest.fixture
def sandbox_config(tmp_path: Path) -> SandboxConfig:
    return SandboxConfig(root=tmp_path / "sandboxes", default_command_timeout_s=60.0)
