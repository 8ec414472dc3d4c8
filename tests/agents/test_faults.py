"""Provider faults and unusable replies: retried, recorded, and classified as infrastructure or agent."""

from __future__ import annotations

import json
import time

import pytest
from agent_kit import (
    TIRX_KERNEL,
    Hang,
    Reply,
    Status,
    StubLLM,
    act,
    assert_verified_correct,
    of_type,
    steps,
    stream,
)

from mkbsim.agents import (
    AttemptSpec,
    LoopConfig,
    Sandbox,
    SandboxConfig,
    VerifierScorers,
    replay_requests,
    run_attempt,
)
from mkbsim.catalog import Budget, Problem
from mkbsim.events import EventStore


def test_rate_limit_then_success_is_retried_and_recorded(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem
) -> None:
    stub.script = [Status(429, "slow down"), act(write={"kernel.py": TIRX_KERNEL}, done=True)]
    outcome = run_attempt(
        store, AttemptSpec("a-429", "c1", p36, "tirx", "solo_tirx"), stub.model(), scorers(p36, "tirx"),
        sandbox=sandbox_config,
    )  # fmt: skip
    assert_verified_correct(store, "a-429")
    assert [r.status for r in stub.received] == [429, 200]
    assert stub.received[0].body["messages"] == stub.received[1].body["messages"]  # the same request, again
    events = stream(store, "a-429")
    (retry,) = [s for s in steps(events, "note") if s.get("event") == "model_retry"]
    assert "RateLimitError" in retry["content"] and "429" in retry["content"]
    assert len(steps(events, "llm")) == 1  # one reply, charged once
    assert outcome.infra_stall_s > 0 and outcome.infra_stall_s >= retry["request_s"] + retry["sleep_s"] - 0.002
    assert replay_requests(events) == stub.ok_requests()


def test_a_storm_of_server_errors_ends_in_infra_error(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem
) -> None:
    stub.script = [Status(500, "internal error")] * 10
    outcome = run_attempt(
        store, AttemptSpec("a-500", "c1", p36, "tirx", "solo_tirx"), stub.model(max_retries=3), scorers(p36, "tirx"),
        sandbox=sandbox_config,
    )  # fmt: skip
    assert outcome.status == "infra_error" and not outcome.passed
    assert "InternalServerError" in (outcome.reason or "") and "after 4 tries" in (outcome.reason or "")
    assert [r.status for r in stub.received] == [500] * 4
    events = stream(store, "a-500")
    assert len([s for s in steps(events, "note") if s.get("event") == "model_retry"]) == 3
    assert of_type(events, "VerifierResult") == [] and of_type(events, "SkillWritten") == []
    assert events[-1].payload["status"] == "infra_error"


def test_a_hanging_response_hits_its_timeout(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem
) -> None:
    stub.script = [Hang(30), Hang(30)]
    t0 = time.monotonic()
    outcome = run_attempt(
        store, AttemptSpec("a-hang", "c1", p36, "tirx", "solo_tirx"),
        stub.model(request_timeout_s=1.0, max_retries=1), scorers(p36, "tirx"), sandbox=sandbox_config,
    )  # fmt: skip
    assert time.monotonic() - t0 < 15
    assert outcome.status == "infra_error" and "Timeout" in (outcome.reason or "")
    (retry,) = [s for s in steps(stream(store, "a-hang"), "note") if s.get("event") == "model_retry"]
    assert retry["request_s"] >= 0.9  # the request waited for its timeout, then gave up


def test_a_hang_past_the_attempt_deadline_ends_the_attempt_not_as_infra(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem
) -> None:
    stub.script = [act(write={"kernel.py": TIRX_KERNEL}), Hang(30)]
    outcome = run_attempt(
        store, AttemptSpec("a-slow", "c1", p36, "tirx", "solo_tirx"), stub.model(), scorers(p36, "tirx"),
        sandbox=sandbox_config, budget=Budget(minutes=0.05),
    )  # fmt: skip
    assert_verified_correct(store, "a-slow")
    assert outcome.reason == "time budget used up (waiting for the model)"


def test_garbage_replies_get_corrective_messages(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem
) -> None:
    stub.script = [
        Reply("Sure! I will now write an amazing kernel."),
        Reply('{"commands": "ls"}'),
        Reply('{"analysis": "x", "task_complete": true}'),
        Reply('{"analysis": "a very long', finish_reason="length"),
        Reply("Here you go:\n```json\n" + json.dumps({"write": {"kernel.py": TIRX_KERNEL}}) + "\n```\nDone."),
        act(done=True),
    ]
    outcome = run_attempt(
        store, AttemptSpec("a-garbage", "c1", p36, "tirx", "solo_tirx"), stub.model(), scorers(p36, "tirx"),
        sandbox=sandbox_config,
    )  # fmt: skip
    assert outcome.passed == assert_verified_correct(store, "a-garbage")["passed"]
    corrections = [s["content"] for s in steps(stream(store, "a-garbage"), "observation")][2:6]
    assert "could not be used: no JSON object found" in corrections[0]
    assert '"commands" must be a list' in corrections[1]
    assert "unknown key(s) 'task_complete'" in corrections[2]
    assert "invalid JSON" in corrections[3] and "hit the output token limit" in corrections[3]
    assert all("Time left:" in c for c in corrections)


def test_only_garbage_ends_the_attempt_as_an_agent_failure(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem
) -> None:
    stub.script = [Reply("no idea")] * 3
    outcome = run_attempt(
        store, AttemptSpec("a-lost", "c1", p36, "tirx", "solo_tirx"), stub.model(), scorers(p36, "tirx"),
        sandbox=sandbox_config, loop=LoopConfig(max_malformed_replies=3),
    )  # fmt: skip
    assert outcome.status == "finished" and not outcome.passed  # scored, not retried
    assert outcome.reason is not None and outcome.reason.startswith("3 unusable replies in a row")
    (final,) = of_type(stream(store, "a-lost"), "VerifierResult")
    assert final["submission"] == "final" and not final["passed"]


def test_an_internal_fault_costs_the_attempt_not_the_run(
    stub: StubLLM,
    store: EventStore,
    sandbox_config: SandboxConfig,
    scorers: VerifierScorers,
    p36: Problem,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken_run(self: Sandbox, command: str, timeout_s: float | None = None, stop: object = None) -> None:
        raise OSError("fork failed")

    monkeypatch.setattr(Sandbox, "run", broken_run)
    stub.script = [act(commands=["ls"])]
    outcome = run_attempt(
        store, AttemptSpec("a-bug", "c1", p36, "tirx", "solo_tirx"), stub.model(), scorers(p36, "tirx"),
        sandbox=sandbox_config,
    )  # fmt: skip
    assert outcome.status == "infra_error" and outcome.reason == "internal error: OSError: fork failed"
    (note,) = [s for s in steps(stream(store, "a-bug"), "note") if s.get("event") == "internal_error"]
    assert "Traceback" in note["content"] and "fork failed" in note["content"]


def test_a_context_overflow_reported_by_the_provider_summarizes_and_asks_again(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem
) -> None:
    overflow = Status(400, "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.")
    stub.script = [act(commands=["true"])] * 3 + [overflow, act(write={"kernel.py": TIRX_KERNEL}, done=True)]
    outcome = run_attempt(
        store, AttemptSpec("a-overflow", "c1", p36, "tirx", "solo_tirx"), stub.model(), scorers(p36, "tirx"),
        sandbox=sandbox_config, loop=LoopConfig(keep_recent_messages=2),
    )  # fmt: skip
    assert outcome.passed == assert_verified_correct(store, "a-overflow")["passed"]
    events = stream(store, "a-overflow")
    assert [s["event"] for s in steps(events, "note") if s.get("event") == "context_summarized"] == [
        "context_summarized"
    ]
    assert replay_requests(events) == stub.ok_requests()
