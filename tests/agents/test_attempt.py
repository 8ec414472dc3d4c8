"""Full attempts over real HTTP against the stub LLM, scored by the real verifier (CPU backend)."""

from __future__ import annotations

import json
from pathlib import Path

from agent_kit import (
    DECORATIVE_KERNEL,
    TIRX_KERNEL,
    StubLLM,
    act,
    assert_verified_correct,
    of_type,
    steps,
    stream,
)

from mkbsim.agents import (
    AttemptSpec,
    SandboxConfig,
    VerifierScorers,
    replay_requests,
    run_attempt,
)
from mkbsim.catalog import DSLS, Budget, Problem
from mkbsim.events import EventStore

SKILL = (
    "# Skill: RMSNorm over 128-wide rows\n\n"
    "- Finding: computing the inverse RMS eagerly and scaling rows in one DSL kernel passed every draw; "
    "measured median 0.09 ms on the CPU verifier.\n"
    "- Failure: a DSL kernel whose output is discarded fails the bypass test (decorative).\n"
    "- Open question: whether fusing the row reduction into the kernel pays at 65536 rows.\n"
)


def test_full_scripted_attempt_writes_submits_twice_and_leaves_a_skill(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem
) -> None:
    stub.script = [
        act(analysis="start", plan="read the docs index, check the DSL imports",
            commands=[f"head -3 {DSLS['tirx'].docs_index}",
                      "python -c 'import torch; print(\"torch\", torch.__version__)'"]),
        act(plan="first kernel", write={"kernel.py": DECORATIVE_KERNEL}, submit=True),
        act(plan="use the kernel's output", write={"kernel.py": TIRX_KERNEL}, submit=True),
        act(plan="record the skill and stop", write={"SKILL.md": SKILL}, done=True),
    ]  # fmt: skip
    spec = AttemptSpec("a-solo", "c1", p36, "tirx", "solo_tirx")
    outcome = run_attempt(store, spec, stub.model(), scorers(p36, "tirx"), sandbox=sandbox_config)

    final = assert_verified_correct(store, "a-solo")
    assert (outcome.status, outcome.passed, outcome.speedup) == ("finished", final["passed"], final["speedup"])
    assert outcome.skill == SKILL
    assert outcome.counted_submissions == 2 and outcome.reason == "the agent declared it done"
    events = stream(store, "a-solo")
    types = [e.type for e in events]
    assert types[0] == "AttemptStarted" and types[-1] == "AttemptFinished"
    started = events[0].payload
    assert [started[k] for k in ("model", "problem", "dsl", "arm")] == ["stub", "p36", "tirx", "solo_tirx"]
    assert started["budget"] == {"minutes": 40, "submissions": 10}

    # the two commands really ran in the sandbox
    commands = [s for s in steps(events, "command") if s.get("action") == "run"]
    assert [c["exit_code"] for c in commands] == [0, 0]
    assert commands[0]["output"].startswith("# TIRx documentation index") and commands[1]["output"].startswith("torch")

    submissions = of_type(events, "SubmissionMade")
    results = of_type(events, "VerifierResult")
    assert [(s["submission"], s["counted"]) for s in submissions] == [(1, True), (2, True)]
    assert submissions[0]["code"] == DECORATIVE_KERNEL and submissions[1]["code"] == TIRX_KERNEL
    assert [r["submission"] for r in results] == [1, 2, "final"]
    assert (results[0]["passed"], results[0]["failure"], results[0]["bypass_ok"]) == (False, "decorative_dsl", False)
    assert results[1]["correct"] and results[2] == final and final["backend"] == "cpu"
    assert results[2]["code"] == TIRX_KERNEL

    # the verifier's feedback and the budget went back to the model
    observations = [s["content"] for s in steps(events, "observation")]
    assert "decorative" in observations[3] and "9 of 10 counted submissions left" in observations[3]
    assert results[1]["feedback"] in observations[4] and "Time left:" in observations[4]

    skills = of_type(events, "SkillWritten")
    assert [s["text"] for s in skills] == [SKILL]
    finished = events[-1].payload
    assert not finished["skipped"] and finished["counted_submissions"] == 2

    # every model request can be rebuilt exactly from the events
    assert replay_requests(events) == stub.ok_requests()
    assert len(stub.ok_requests()) == 4
    # the task (with the docs index location) opens the conversation; credentials never reach the store
    task = stub.ok_requests()[0][1]["content"]
    assert task.startswith("# Task p36") and DSLS["tirx"].docs_index in task
    dump = json.dumps([e.payload for e in events])
    assert "sk-stub-secret" not in dump
    assert started["agent"]["params"] == {"api_base": stub.url, "api_key": "[REDACTED]", "temperature": 0.0}


def test_submissions_beyond_the_budget_and_unparsable_files_are_not_counted(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem
) -> None:
    stub.script = [
        act(write={"kernel.py": "def run(:\n"}, submit=True),
        act(write={"kernel.py": TIRX_KERNEL}, submit=True),
        act(submit=True),
        act(done=True),
    ]
    spec = AttemptSpec("a-budget", "c1", p36, "tirx", "solo_tirx")
    outcome = run_attempt(store, spec, stub.model(), scorers(p36, "tirx"), sandbox=sandbox_config, budget=Budget(40, 1))
    events = stream(store, "a-budget")
    submissions = of_type(events, "SubmissionMade")
    assert [(s["submission"], s["counted"]) for s in submissions] == [(1, False), (2, True)]
    assert "does not parse" in submissions[0]["reason"]
    observations = [s["content"] for s in steps(events, "observation")]
    assert "not counted: kernel.py does not parse" in observations[2]
    assert "Refused: all 1 counted submissions are used" in observations[4]
    assert outcome.counted_submissions == 1
    assert_verified_correct(store, "a-budget")  # the final verification still counts


def test_time_budget_ends_the_attempt_and_the_final_kernel_is_still_verified(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem
) -> None:
    stub.script = [act(write={"kernel.py": TIRX_KERNEL}, commands=["sleep 30"]), act(done=True)]
    spec = AttemptSpec("a-time", "c1", p36, "tirx", "solo_tirx")
    outcome = run_attempt(
        store, spec, stub.model(), scorers(p36, "tirx"), sandbox=sandbox_config, budget=Budget(minutes=0.05)
    )  # 3 seconds: the command is cut at the deadline
    assert outcome.status == "finished" and outcome.reason == "time budget used up"
    events = stream(store, "a-time")
    (command,) = [s for s in steps(events, "command") if s.get("action") == "run"]
    assert command["timed_out"] and command["duration_s"] < 10
    assert len(stub.ok_requests()) == 1
    assert_verified_correct(store, "a-time")


def test_a_verifier_payload_that_breaks_the_event_schema_is_a_verifier_failure(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, p36: Problem
) -> None:
    class BrokenScorer:
        def score(self, kernel_path: Path, *, attempt_id: str, submission: int | str) -> object:
            from mkbsim.agents import Verdict

            return Verdict({"attempt_id": attempt_id, "submission": submission, "passed": "yes"}, "looks fine")

    stub.script = [act(write={"kernel.py": TIRX_KERNEL}, submit=True), act(done=True)]
    spec = AttemptSpec("a-broken", "c1", p36, "tirx", "solo_tirx")
    outcome = run_attempt(store, spec, stub.model(), BrokenScorer(), sandbox=sandbox_config)  # type: ignore[arg-type]
    events = stream(store, "a-broken")
    (made,) = of_type(events, "SubmissionMade")
    assert not made["counted"] and "VerifierResult" in made["reason"]
    assert of_type(events, "VerifierResult") == []
    assert outcome.status == "infra_error" and "final verification failed 3 times" in (outcome.reason or "")
