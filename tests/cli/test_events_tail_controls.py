"""`mkbsim events tail` prints stored text, which is the agents' (command output, skills, verifier feedback):
no terminal control in it reaches the terminal raw, C1 controls and bidirectional overrides included, and
every line is still the JSON of its event."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mkbsim.cli import main
from mkbsim.events import AgentStep, EventStore, NewEvent, attempt_stream

#: ESC and BEL (C0), DEL, CSI and OSC as C1 controls, the bidirectional embeddings, overrides and isolates.
HOSTILE = (
    "\x1b]0;TITLE\x07 \x7f \u009b31m \u009d0;T\u009c \u202aE\u202bE\u202cP\u202dO\u202eO \u2066I\u2067I\u2068I\u2069"
)


def test_tail_escapes_every_terminal_control(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    step = AgentStep(attempt_id="a1", step=0, kind="command", content=HOSTILE, elapsed_s=0.0, tokens=None,
                     cost_usd=None)  # fmt: skip
    with EventStore(store, create=True) as s:
        s.append([NewEvent.of(attempt_stream("a1"), step)])
    assert main(["events", "tail", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    bidi = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    controls = [c for c in out if c != "\n" and (ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or c in bidi)]
    assert controls == [], controls
    assert json.loads(out)["payload"]["content"] == HOSTILE
