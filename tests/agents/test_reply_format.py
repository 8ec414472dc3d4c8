"""Structured replies: how a reply is asked for (``reply_format``), what is recorded, the fallback when a
provider refuses a format, and local prices."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from agent_kit import StubLLM, act, of_type, steps, stream

from mkbsim.agents import (
    REPLY_KEYS,
    REPLY_SCHEMA,
    AttemptSpec,
    CostLedger,
    ModelConfig,
    ReplyError,
    SandboxConfig,
    VerifierScorers,
    load_llm_campaign,
    parse_reply,
    replay_requests,
    run_attempt,
)
from mkbsim.catalog import Problem
from mkbsim.events import EventStore

LOCAL_EXAMPLE = Path(__file__).parents[2] / "examples" / "local.toml"

#: A reply with every key, as a schema-constrained model writes it.
FULL = {"analysis": "a", "plan": "p", "write": {"SKILL.md": "- a finding\n"}, "commands": ["ls"],
        "submit": False, "done": False}  # fmt: skip


def full(**keys: Any) -> str:
    return json.dumps({**FULL, **keys})


@pytest.mark.parametrize(
    "reply",
    [FULL, {**FULL, "commands": ["ls", {"cmd": "make", "timeout_s": 5}]}, {**FULL, "write": {}, "commands": []}],
)
def test_what_the_schema_allows_the_parser_accepts(reply: dict[str, Any]) -> None:
    jsonschema.validate(reply, REPLY_SCHEMA)
    assert parse_reply(json.dumps(reply)).analysis == "a"


@pytest.mark.parametrize(
    "reply",
    [
        {k: v for k, v in FULL.items() if k != "done"},  # every key is required: the model decides each action
        {**FULL, "task_complete": True},
        {**FULL, "commands": [{"cmd": "ls", "timeout": 3}]},
        {**FULL, "write": {"kernel.py": 3}},
        {**FULL, "submit": "yes"},
    ],
)
def test_the_schema_refuses_what_the_parser_refuses(reply: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply, REPLY_SCHEMA)
    if set(reply) <= set(REPLY_KEYS) and len(reply) < len(REPLY_KEYS):
        return  # the parser takes a missing key as "none" (text replies may leave keys out)
    with pytest.raises(ReplyError):
        parse_reply(json.dumps(reply))


def test_raw_newlines_in_strings_and_a_broken_object_around_an_empty_one() -> None:
    # a model writing a file inside a JSON string often leaves its newlines raw
    reply = parse_reply('{"write": {"kernel.py": "import torch\ndef run(x):\n    return x\n"}, "done": true}')
    assert reply.write["kernel.py"].count("\n") == 3 and reply.done
    # the empty "write" inside a broken reply is not a reply of its own (it would silently run nothing)
    with pytest.raises(ReplyError, match="invalid JSON"):
        parse_reply('{"plan": "x" "write": {}, "commands": ["ls"]}')
    assert not parse_reply("{}").has_action  # an empty object on its own is a reply without actions


@pytest.mark.parametrize(
    ("model", "params", "configured", "candidates"),
    [
        ("openai/gpt-4.1", {}, "auto", ("json_schema", "text")),  # litellm: supports response schemas
        ("anthropic/claude-sonnet-4-5", {}, "auto", ("json_schema", "text")),
        ("openai/gemma-3-270m", {"api_base": "http://127.0.0.1:8080/v1"}, "auto", ("tools", "json_schema", "text")),
        ("openai/gemma-3-270m", {}, "auto", ("text",)),  # unknown to litellm, no local server named
        ("openai/gpt-4.1", {}, "text", ("text",)),
        ("openai/gemma-3-270m", {"api_base": "http://127.0.0.1:8080/v1"}, "json_schema", ("json_schema",)),
    ],
)
def test_auto_asks_litellm_then_assumes_an_openai_compatible_server(
    model: str, params: dict[str, Any], configured: str, candidates: tuple[str, ...]
) -> None:
    formats = ModelConfig(model, params, reply_format=configured).reply_formats()
    assert formats.candidates == candidates
    assert formats.reason == "configured" if configured != "auto" else formats.reason.startswith("auto: ")


def _attempt(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem,
    attempt_id: str, **model: Any,
) -> Any:  # fmt: skip
    spec = AttemptSpec(attempt_id, "c1", p36, "tirx", "solo_tirx")
    ledger = CostLedger()
    outcome = run_attempt(store, spec, stub.model(**model), scorers(p36, "tirx"), sandbox=sandbox_config, ledger=ledger)
    return outcome, stream(store, attempt_id), ledger


def test_a_forced_tool_call_carries_the_reply_and_the_conversation_replays_exactly(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem
) -> None:
    stub.script = [
        act(**{**FULL, "write": {}, "commands": ["echo hello from the sandbox"]}),
        act(**{**FULL, "write": {"kernel.py": "", "SKILL.md": "- a finding\n"}, "commands": [], "done": True}),
    ]  # fmt: skip
    outcome, events, _ = _attempt(stub, store, sandbox_config, scorers, p36, "a-tools")

    assert outcome.status == "finished" and outcome.skill == "- a finding\n"
    # a local server litellm does not know: a forced call of the `reply` function, every turn
    assert [r.reply_format for r in stub.received] == ["tools", "tools"]
    assert stub.received[0].body["tool_choice"] == {"type": "function", "function": {"name": "reply"}}
    assert stub.received[0].body["tools"][0]["function"]["parameters"] == REPLY_SCHEMA
    started = events[0].payload["agent"]["reply_format"]
    assert started == {"configured": "auto", "candidates": ["tools", "json_schema", "text"],
                       "reason": "auto: a server at api_base that litellm knows nothing about"}  # fmt: skip
    turns = steps(events, "llm")
    assert [t["reply_format"] for t in turns] == ["tools", "tools"]
    assert json.loads(turns[0]["content"])["commands"] == ["echo hello from the sandbox"]  # the call's arguments
    (command,) = [s for s in steps(events, "command") if s.get("action") == "run"]
    assert (command["exit_code"], command["output"]) == (0, "hello from the sandbox\n")
    # the replies go back as assistant text: the requests are the recorded conversation, in every format
    assert replay_requests(events) == stub.ok_requests()
    assert stub.ok_requests()[1][2] == {"role": "assistant", "content": turns[0]["content"]}


def test_json_schema_is_asked_through_response_format(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem
) -> None:
    stub.script = [act(**{**FULL, "write": {"kernel.py": ""}, "commands": [], "done": True})]
    outcome, events, _ = _attempt(stub, store, sandbox_config, scorers, p36, "a-schema", reply_format="json_schema")
    assert outcome.status == "finished"
    (request,) = stub.received
    assert request.body["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "agent_reply", "schema": REPLY_SCHEMA, "strict": False},
    }  # fmt: skip
    assert "tools" not in request.body
    assert [t["reply_format"] for t in steps(events, "llm")] == ["json_schema"]
    assert events[0].payload["agent"]["reply_format"]["candidates"] == ["json_schema"]


@pytest.mark.parametrize(("refused", "used"), [(("tools",), "json_schema"), (("tools", "json_schema"), "text")])
def test_auto_asks_again_in_the_next_format_when_one_is_refused(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem,
    refused: tuple[str, ...], used: str,
) -> None:  # fmt: skip
    stub.refuse = refused
    stub.script = [act(commands=["true"]), act(write={"kernel.py": ""}, done=True)]
    outcome, events, _ = _attempt(stub, store, sandbox_config, scorers, p36, "a-fallback")
    assert outcome.status == "finished" and outcome.reason.startswith("the agent declared it done")
    # each refused format is asked once, then the next one for the rest of the attempt
    assert [r.reply_format for r in stub.received] == [*refused, used, used]
    fallbacks = [s for s in steps(events, "note") if s.get("event") == "reply_format_fallback"]
    next_formats = [*refused[1:], used]
    assert [(f["refused"], f["reply_format"]) for f in fallbacks] == list(zip(refused, next_formats, strict=True))
    assert "does not support that request format" in fallbacks[0]["content"]
    assert [t["reply_format"] for t in steps(events, "llm")] == [used, used]
    assert replay_requests(events) == stub.ok_requests()


def test_a_configured_format_the_provider_refuses_is_an_infrastructure_failure(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem
) -> None:
    stub.refuse = ("tools",)
    outcome, _, _ = _attempt(stub, store, sandbox_config, scorers, p36, "a-refused", reply_format="tools")
    assert outcome.status == "infra_error"  # runs again on resume; the agent is not blamed
    assert outcome.reason.startswith("model unavailable: BadRequestError (HTTP 400)")
    assert len(stub.received) == 1  # a refusal is not retried


@pytest.mark.parametrize(("price", "expected"), [(None, None), ((0, 0), 0.0), ((1.5, 6.0), "by tokens")])
def test_a_configured_price_replaces_litellms(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem,
    price: tuple[float, float] | None, expected: object,
) -> None:  # fmt: skip
    stub.script = [act(commands=["true"]), act(write={"kernel.py": ""}, done=True)]
    _, events, ledger = _attempt(stub, store, sandbox_config, scorers, p36, "a-price", price_per_mtok=price)
    turns = steps(events, "llm")
    if expected == "by tokens":
        assert price is not None
        costs = [(t["prompt_tokens"] * price[0] + t["completion_tokens"] * price[1]) / 1e6 for t in turns]
        assert [t["cost_usd"] for t in turns] == pytest.approx(costs) and costs[0] > 0
    else:
        assert [t["cost_usd"] for t in turns] == [expected, expected]
    # the model is unknown to litellm: without a price its calls are unpriced, with one (even 0) they are not
    assert ledger.unpriced_calls == (2 if price is None else 0) and ledger.calls == 2
    agent = events[0].payload["agent"]
    assert agent["price_per_mtok"] == (None if price is None else {"input": price[0], "output": price[1]})
    spent = sum(t["cost_usd"] or 0 for t in turns)
    assert of_type(events, "AttemptFinished")[0]["cost_usd"] == pytest.approx(spent, abs=1e-6)  # stored rounded


def test_the_local_example_loads() -> None:
    config = load_llm_campaign(LOCAL_EXAMPLE)
    (agent,) = config.agents
    assert (agent.reply_format, agent.price_per_mtok, agent.context_tokens) == ("auto", (0.0, 0.0), 16384)
    assert agent.params["api_base"] == "http://127.0.0.1:8080/v1"
    assert config.verifier_backend == "cpu" and config.directions == ("cutedsl2tirx", "tirx2cutedsl")
    assert config.skip_unverifiable  # no minutes of a slow model on CuTe DSL kernels the cpu verifier cannot run
    assert agent.reply_formats().candidates == ("tools", "json_schema", "text")
