"""The reply format and context management (summarizing early turns near the window)."""

from __future__ import annotations

import pytest
from agent_kit import SUMMARY_TEXT, TIRX_KERNEL, StubLLM, act, assert_verified_correct, steps, stream

from mkbsim.agents import (
    AttemptSpec,
    LoopConfig,
    ReplyError,
    SandboxConfig,
    VerifierScorers,
    parse_reply,
    replay_requests,
    run_attempt,
)
from mkbsim.agents._conversation import SUMMARY_HEADING
from mkbsim.catalog import Problem
from mkbsim.events import EventStore


def test_reply_forms() -> None:
    reply = parse_reply('{"analysis": "a", "commands": ["ls", {"cmd": "make", "timeout_s": 5}], "submit": true}')
    assert [(c.cmd, c.timeout_s) for c in reply.commands] == [("ls", None), ("make", 5.0)]
    assert reply.submit and not reply.done and reply.has_action
    fenced = parse_reply('Plan below.\n```json\n{"done": true}\n```\nthanks')
    assert fenced.done
    prose = parse_reply('I will look around. {"commands": ["ls -la"]} That is all.')
    assert prose.commands[0].cmd == "ls -la"
    assert not parse_reply('{"analysis": "thinking"}').has_action


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the reply is empty"),
        ("no json at all", "no JSON object found"),
        ('{"commands": ["ls"', "invalid JSON"),
        ('{"command": ["ls"]}', "unknown key(s) 'command'"),
        ('{"commands": [{"cmd": "ls", "timeout": 3}]}', "commands[0] must be a string or"),
        ('{"commands": [{"cmd": "ls", "timeout_s": -1}]}', "commands[0].timeout_s must be a positive number"),
        ('{"commands": ["  "]}', "a command is empty"),
        ('{"submit": "yes"}', '"submit" must be true or false'),
        ('{"write": {"kernel.py": 3}}', '"write" must be an object'),
        ('{"analysis": ["a"]}', '"analysis" must be a string'),
    ],
)
def test_malformed_replies_are_named(text: str, message: str) -> None:
    with pytest.raises(ReplyError, match="^" + message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        parse_reply(text)


def test_early_turns_are_summarized_near_the_context_window(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem
) -> None:
    noisy = act(commands=["python -c 'print(\"y\" * 3000)'"])
    stub.script = [noisy] * 6 + [act(write={"kernel.py": TIRX_KERNEL}, done=True)]
    model = stub.model(params={"max_tokens": 200}, context_tokens=4000)
    outcome = run_attempt(
        store, AttemptSpec("a-ctx", "c1", p36, "tirx", "solo_tirx"), model, scorers(p36, "tirx"),
        sandbox=sandbox_config, loop=LoopConfig(keep_recent_messages=4),
    )  # fmt: skip
    assert outcome.passed == assert_verified_correct(store, "a-ctx")["passed"]
    events = stream(store, "a-ctx")
    assert events[0].payload["agent"]["params"]["max_tokens"] == 200
    summaries = [s for s in steps(events, "note") if s.get("event") == "context_summarized"]
    assert summaries, "the history outgrew 80% of a 4000-token window but was never summarized"
    assert summaries[0]["content"].endswith(SUMMARY_HEADING + SUMMARY_TEXT)
    # the summary request and every turn after it, exactly as the provider received them
    sent = stub.ok_requests()
    assert replay_requests(events) == sent
    after = [r for r in sent if r[1]["content"].endswith(SUMMARY_TEXT)]
    assert len(after) >= 2  # summarized again later: the earlier summary is folded into the new one
    for request in after:  # system, task + summary, then the 4 most recent messages, still alternating
        assert [m["role"] for m in request] == ["system", "user", "assistant", "user", "assistant", "user"]
    # turns are asked for as a forced tool call (a server litellm does not know), summaries as plain text
    summary_requests = [r for r in stub.received if r.messages[0]["content"].startswith("You condense")]
    assert {r.reply_format for r in summary_requests} == {"text"}
    assert {r.reply_format for r in stub.received if r not in summary_requests} == {"tools"}
    summary_calls = [s for s in steps(events, "llm") if s.get("purpose") == "summary"]
    assert len(summary_calls) == len(summaries) and all(s["tokens"] for s in summary_calls)
