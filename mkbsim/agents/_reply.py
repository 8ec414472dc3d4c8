"""The reply format: one JSON object per model reply, parsed into the actions of one turn.

```json
{
  "analysis": "what the last observation showed",
  "plan": "what this turn does and why",
  "write": {"kernel.py": "...the whole file...", "SKILL.md": "..."},
  "commands": ["python check.py", {"cmd": "python bench.py", "timeout_s": 300}],
  "submit": false,
  "done": false
}
```

Every key is optional. A turn's actions run in this order: ``write`` (files inside the working
directory), ``commands`` (each in a fresh bash), ``submit`` (kernel.py to the verifier), ``done``
(end the attempt). The JSON may sit in a fenced block or follow some prose; the first object is used.

How the object is asked for (``reply_format``, per agent in the campaign file; DESIGN §4):

- ``text``: only the instructions in the system message; the model may answer anything, and an
  unusable reply gets a corrective message.
- ``json_schema``: also OpenAI's ``response_format`` with ``REPLY_SCHEMA``; providers that honour it
  constrain the reply to the schema.
- ``tools``: also one function ``reply`` whose parameters are ``REPLY_SCHEMA``, forced by ``tool_choice``;
  its arguments are the reply. Prior replies go back to the model as plain assistant text, so the
  conversation (and its replay) is the same in every format.
- ``auto``: the first of the candidates ``auto_reply_formats`` names that the provider accepts.

The system message is the same in every format, and a reply is parsed the same way whatever its format
(a provider may ignore the schema), so the malformed-reply handling stays.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

REPLY_KEYS = ("analysis", "plan", "write", "commands", "submit", "done")

#: The values of an agent's ``reply_format``.
REPLY_FORMATS = ("auto", "json_schema", "tools", "text")

#: The function a ``tools`` request forces the model to call.
REPLY_TOOL = "reply"

_COMMAND_SCHEMA = {
    "type": "object",
    "properties": {"cmd": {"type": "string"}, "timeout_s": {"type": "number"}},
    "required": ["cmd"],
    "additionalProperties": False,
}

#: The reply object as a JSON schema (what ``parse_reply`` accepts, less its value checks). Every key is
#: required: a model constrained by the schema then decides each action (a small model otherwise takes the
#: shortest path, an empty object); ``{}``, ``[]`` and ``false`` mean "none".
REPLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "analysis": {"type": "string"},
        "plan": {"type": "string"},
        "write": {"type": "object", "additionalProperties": {"type": "string"}},
        "commands": {"type": "array", "items": {"anyOf": [{"type": "string"}, _COMMAND_SCHEMA]}},
        "submit": {"type": "boolean"},
        "done": {"type": "boolean"},
    },
    "required": list(REPLY_KEYS),
    "additionalProperties": False,
}


def structured_request(reply_format: str) -> dict[str, Any]:
    """The ``litellm.completion`` arguments that ask for the reply object in ``reply_format``.

    Not strict: OpenAI's strict mode forbids open maps such as ``write``."""
    if reply_format == "json_schema":
        schema = {"name": "agent_reply", "schema": REPLY_SCHEMA, "strict": False}
        return {"response_format": {"type": "json_schema", "json_schema": schema}}
    if reply_format == "tools":
        function = {"name": REPLY_TOOL, "description": "Your turn: the actions to run.", "parameters": REPLY_SCHEMA}
        return {
            "tools": [{"type": "function", "function": function}],
            "tool_choice": {"type": "function", "function": {"name": REPLY_TOOL}},
        }
    if reply_format == "text":
        return {}
    raise ValueError(f"unknown reply format {reply_format!r}; use one of {', '.join(REPLY_FORMATS)}")


_REPLY_FORMAT = """\
Reply with exactly one JSON object (no other text) with these keys, each optional:
{
  "analysis": "what the last observation showed you",
  "plan": "what you do in this turn and why",
  "write": {"kernel.py": "the complete new content of the file", "SKILL.md": "..."},
  "commands": ["shell command", {"cmd": "shell command", "timeout_s": 300}],
  "submit": false,
  "done": false
}
- "write" creates or replaces files inside your working directory (paths relative to it).
- "commands" run one after another, each in a fresh `bash -c` in your working directory (a `cd`
  does not carry over; stdin is closed). Each has a time limit: "timeout_s" or DEFAULT_TIMEOUT s by
  default, at most MAX_TIMEOUT s. You see each command's output (long output is cut to its head
  and tail) and exit code.
- "submit": true sends the current kernel.py to the verifier after the commands; you get its
  feedback in the next message. Unparsable files and verifier infrastructure errors are not counted.
- "done": true ends the attempt after this turn's actions: kernel.py is verified once more (that
  verdict counts) and SKILL.md is captured as your skill.
- Order within a turn: write, commands, submit, done. Every message to you ends with the time and
  counted submissions you have left."""


def reply_instructions(default_timeout_s: float, max_timeout_s: float) -> str:
    """The format description given to the model (part of the system message, in every format)."""
    text = _REPLY_FORMAT.replace("DEFAULT_TIMEOUT", f"{default_timeout_s:g}")
    return text.replace("MAX_TIMEOUT", f"{max_timeout_s:g}")


class ReplyError(ValueError):
    """A reply that does not follow the format; the message tells the model what to fix."""


@dataclass(frozen=True)
class Command:
    cmd: str
    timeout_s: float | None = None


@dataclass(frozen=True)
class Reply:
    analysis: str
    plan: str
    write: dict[str, str]
    commands: tuple[Command, ...]
    submit: bool
    done: bool

    @property
    def has_action(self) -> bool:
        return bool(self.write or self.commands or self.submit or self.done)


_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)\n\s*```", re.DOTALL)


def _first_object(text: str) -> dict[str, object]:
    """The first JSON object in the text (a fenced block's first). Control characters inside strings are
    accepted (models write files with raw newlines); an empty object right after a broken one is that
    broken object's inside (``"write": {}``), not a reply."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder(strict=False)
    last_error = "no JSON object found"
    for candidate in candidates:
        broken = False
        start = candidate.find("{")
        while start != -1:
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except json.JSONDecodeError as exc:
                last_error = f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
                broken = True
            else:
                if isinstance(value, dict) and (value or not broken):
                    return value
            start = candidate.find("{", start + 1)
    raise ReplyError(last_error)


def parse_reply(text: str) -> Reply:
    """Parse a model reply; raise ``ReplyError`` naming what is wrong."""
    if not text.strip():
        raise ReplyError("the reply is empty")
    obj = _first_object(text)
    unknown = sorted(set(obj) - set(REPLY_KEYS))
    if unknown:
        raise ReplyError(f"unknown key(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(REPLY_KEYS)}")
    for key in ("analysis", "plan"):
        if not isinstance(obj.get(key, ""), str):
            raise ReplyError(f'"{key}" must be a string')
    for key in ("submit", "done"):
        if not isinstance(obj.get(key, False), bool):
            raise ReplyError(f'"{key}" must be true or false')
    write = obj.get("write", {})
    if not isinstance(write, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in write.items()):
        raise ReplyError('"write" must be an object mapping relative file paths to their full text')
    raw_commands = obj.get("commands", [])
    if not isinstance(raw_commands, list):
        raise ReplyError('"commands" must be a list')
    commands = []
    for i, raw in enumerate(raw_commands):
        if isinstance(raw, str):
            commands.append(Command(raw))
            continue
        if not isinstance(raw, dict) or not isinstance(raw.get("cmd"), str) or set(raw) - {"cmd", "timeout_s"}:
            raise ReplyError(f'commands[{i}] must be a string or {{"cmd": "...", "timeout_s": seconds}}')
        timeout = raw.get("timeout_s")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0):
            raise ReplyError(f"commands[{i}].timeout_s must be a positive number of seconds")
        commands.append(Command(raw["cmd"], float(timeout) if timeout is not None else None))
    if any(not c.cmd.strip() for c in commands):
        raise ReplyError("a command is empty")
    return Reply(
        analysis=str(obj.get("analysis", "")), plan=str(obj.get("plan", "")), write=dict(write),
        commands=tuple(commands), submit=bool(obj.get("submit", False)), done=bool(obj.get("done", False)),
    )  # fmt: skip


def corrective_message(error: ReplyError) -> str:
    return (
        f"Your last reply could not be used: {error}. Nothing was run. Reply with exactly one JSON object "
        f'with the keys {", ".join(REPLY_KEYS)} (all optional), for example {{"analysis": "...", '
        f'"commands": ["ls"]}}.'
    )
