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
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

REPLY_KEYS = ("analysis", "plan", "write", "commands", "submit", "done")

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


def reply_format(default_timeout_s: float, max_timeout_s: float) -> str:
    """The format description given to the model (part of the system message)."""
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
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    last_error = "no JSON object found"
    for candidate in candidates:
        start = candidate.find("{")
        while start != -1:
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except json.JSONDecodeError as exc:
                last_error = f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            else:
                if isinstance(value, dict):
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
