"""What an agent writes is its own doing, not infrastructure: a lone surrogate in its reply or in its kernel's
exception message, a NUL byte or a lone surrogate in a command must not end its attempt as ``infra_error``
(which is not scored, and runs again on every resume). Such text is stored and sent with U+FFFD in place of
the surrogate; such a command is not run, and the agent is told why."""

from __future__ import annotations

import json

from agent_kit import Reply, StubLLM, act, of_type, steps, stream

from mkbsim.agents import AttemptSpec, SandboxConfig, VerifierScorers, run_attempt
from mkbsim.catalog import Problem
from mkbsim.events import EventStore

# p36 in TIRx whose import fails with a message no encoder takes
SURROGATE_KERNEL = """\
import torch
import tvm
from tvm.script import tirx as T

raise RuntimeError("kernel error text with a lone surrogate: " + chr(0xD800))


def run(hidden_states, weight):
    return hidden_states
"""


def test_text_no_encoder_takes_is_the_agents_and_the_attempt_goes_on(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem
) -> None:
    stub.script = [
        # a raw lone surrogate in the reply's text; in its JSON, escapes of a NUL byte and of a lone surrogate
        Reply('{"analysis": "a lone \ud800 here", "commands": ["echo a\\u0000b", "echo \\ud800", "echo fine"]}'),
        act(write={"kernel.py": SURROGATE_KERNEL}, submit=True),
        act(done=True),
    ]
    spec = AttemptSpec("a-text", "c1", p36, "tirx", "solo_tirx")
    outcome = run_attempt(store, spec, stub.model(), scorers(p36, "tirx"), sandbox=sandbox_config)

    assert outcome.status == "finished", outcome.reason
    events = stream(store, "a-text")
    assert "a lone \ufffd here" in steps(events, "llm")[0]["content"]
    runs = [s for s in steps(events, "command") if s.get("action") == "run"]
    assert [r["exit_code"] for r in runs] == [None, None, 0] and runs[2]["output"] == "fine\n"
    assert "NUL byte" in runs[0]["refused"] and "lone surrogate" in runs[1]["refused"]
    assert runs[1]["content"] == "echo \ufffd"
    # the kernel's message, as the verifier reported it, stored with U+FFFD and sent back
    first = next(p for p in of_type(events, "VerifierResult") if p["submission"] == 1)
    assert not first["passed"] and "lone surrogate: \ufffd" in json.dumps(first, ensure_ascii=False), first
    told = stub.received[1].messages[-1]["content"]
    assert "(not run: it holds a NUL byte" in told and "fine" in told
    assert "lone surrogate: \ufffd" in stub.received[2].messages[-1]["content"]
