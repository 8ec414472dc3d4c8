"""The message history an attempt sends to its model, rebuilt from ``AgentStep`` payloads.

The live loop and a replay use the same ``Conversation.apply``: an ``observation`` step is a
message to the model (its ``role`` says system or user), a ``llm`` step with purpose ``turn`` is
the model's reply, and a ``note`` with ``event: context_summarized`` replaces early turns by a
summary. So the requests of a recorded attempt can be rebuilt exactly (``replay_requests``).

Context management: before each request the prompt size is estimated from the characters sent,
calibrated by the provider's own token counts of the previous reply. Past ``summarize_at`` of
the window, everything between the task message and the last few messages is summarized by the
model itself and the summary joins the task message; the kept tail starts with a reply, so user
and assistant messages still alternate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mkbsim.events import RecordedEvent

#: Characters-to-tokens ratio used until a provider reports real counts (English and code: ~3.5).
_DEFAULT_TOKENS_PER_CHAR = 0.3

SUMMARY_HEADING = "\n\n## Summary of your earlier turns\n\n"

_SUMMARY_SYSTEM = (
    "You condense the earlier part of a coding agent's session so that it can continue with a "
    "shorter history. Be factual and specific; keep numbers, file names, error messages and verdicts."
)
_SUMMARY_INSTRUCTIONS = (
    "Write a summary the agent can continue from: the files it wrote and their current state, what "
    "its commands showed (with the key numbers and errors), every submission and its verdict, what "
    "failed and why, and what it meant to do next. Plain text, no JSON."
)


@dataclass
class Conversation:
    entries: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    tokens_per_char: float = _DEFAULT_TOKENS_PER_CHAR

    def apply(self, payload: Mapping[str, Any]) -> None:
        """Update the history with one recorded ``AgentStep`` payload."""
        kind, step, content = payload["kind"], payload["step"], payload["content"]
        if kind == "observation":
            self.entries.append((step, {"role": payload.get("role", "user"), "content": content}))
        elif kind == "llm" and payload.get("purpose", "turn") == "turn":
            self.entries.append((step, {"role": "assistant", "content": content}))
        elif kind == "note" and payload.get("event") == "context_summarized":
            kept = [e for e in self.entries[2:] if e[0] >= payload["kept_from_step"]]
            self.entries = [self.entries[0], (step, {"role": "user", "content": content}), *kept]

    def messages(self) -> list[dict[str, str]]:
        return [dict(m) for _, m in self.entries]

    def chars(self) -> int:
        return sum(len(m["content"]) for _, m in self.entries)

    def calibrate(self, prompt_tokens: int | None, prompt_chars: int) -> None:
        """Learn this model's tokens per character from a reply's reported prompt size."""
        if prompt_tokens and prompt_chars > 1000:
            self.tokens_per_char = prompt_tokens / prompt_chars

    def estimated_tokens(self) -> int:
        return int(self.chars() * self.tokens_per_char) + 4 * len(self.entries)

    def summarizable(self, keep_recent: int) -> tuple[list[tuple[int, dict[str, str]]], int] | None:
        """The entries to summarize and the step of the first kept one, or None if too few.

        Entries 0 and 1 are the system and task messages; the kept tail is the last ``keep_recent``
        (made even, so it starts with a reply and alternation survives).
        """
        keep = max(2, keep_recent - keep_recent % 2)
        middle = self.entries[2 : len(self.entries) - keep]
        if len(middle) < 2:
            return None
        return middle, self.entries[len(self.entries) - keep][0]

    def summary_request(self, middle: list[tuple[int, dict[str, str]]], max_chars: int) -> list[dict[str, str]]:
        """The messages asking the model to summarize ``middle`` (the task message may hold an
        earlier summary, which is therefore folded into the new one)."""
        per_message = max(500, max_chars // max(len(middle), 1))
        lines = [f"[{m['role']}]\n{_shorten(m['content'], per_message)}" for _, m in middle]
        current = self.entries[1][1]["content"]
        return [
            {"role": "system", "content": _SUMMARY_SYSTEM},
            {
                "role": "user",
                "content": f"The agent's task and any earlier summary:\n\n{current}\n\n"
                f"Earlier turns, oldest first:\n\n" + "\n\n".join(lines) + f"\n\n{_SUMMARY_INSTRUCTIONS}",
            },
        ]


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters omitted ...]\n{text[-half:]}"


def current_try(events: Iterable[RecordedEvent]) -> list[RecordedEvent]:
    """An attempt stream's events from its last ``AttemptStarted`` on (a retried attempt starts over)."""
    events = list(events)
    starts = [i for i, e in enumerate(events) if e.type == "AttemptStarted"]
    return events[starts[-1] :] if starts else events


def replay_requests(events: Iterable[RecordedEvent]) -> list[list[dict[str, str]]]:
    """The message lists of every model request of an attempt's latest try, in order."""
    conversation = Conversation()
    requests: list[list[dict[str, str]]] = []
    for event in current_try(events):
        if event.type != "AgentStep":
            continue
        p = event.payload
        if p["kind"] == "llm":
            requests.append(p["request"] if p.get("purpose") == "summary" else conversation.messages())
        conversation.apply(p)
    return requests
