"""Secrets stay in the parent (DESIGN §4): as defence in depth, any secret value that shows up in what an
attempt stores or sends to its model is replaced by ``[REDACTED]`` first.

The sandbox already keeps every secret out of the agent's reach (no inherited environment, no view of the
parent or its files); redaction covers what that cannot: a key echoed in a provider's error message, or a
secret that reached an observation some way nobody foresaw. Secret values: the agent's ``api_key_env``
variable and its ``params``' credentials (``credentials``: ``api_key``..., every value of a headers table),
every variable of the campaign's env file, and every environment variable whose name says it holds a
credential (``OPENAI_API_KEY``, ``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``...). Values shorter than
``MIN_SECRET_CHARS`` are left alone: redacting ``1`` or ``true`` everywhere would garble every observation
and protect nothing.

A campaign file's credentials are not stored either: ``without_credentials`` is what ``CampaignStarted`` and
``AttemptStarted`` record of its configuration and an agent's ``params``.

What an attempt stores or sends passes the same gate for another reason: a lone surrogate (a model's JSON
``"\\ud800"``, a kernel's exception message) is not a character, and neither SQLite nor a provider can encode
it; it becomes U+FFFD, so that the agent's text cannot make its attempt fail as infrastructure.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from mkbsim.agents._model import ModelConfig
from mkbsim.events import AppendResult, EventLog, NewEvent, RecordedEvent

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 8

#: Names of variables and parameters that hold credentials (api_key, aws_secret_access_key, azure_ad_token,
#: vertex_credentials, HF_TOKEN, ...; not max_tokens).
SECRET_NAME = re.compile(r"(^|_)(key|secret|password|passwd|token|credentials?)$|api_?key|secret|private_key",
                         re.IGNORECASE)  # fmt: skip
#: Tables whose every value is a credential whatever its name (``extra_headers``: Authorization, X-Api-Key...).
CREDENTIAL_TABLE = re.compile(r"headers$", re.IGNORECASE)
_SURROGATE = re.compile("[\ud800-\udfff]")


def credentials(value: Any, *, inside: bool = False) -> list[str]:
    """The credentials in a configuration ``value``: every string under a credential-like name, or in a
    headers table, at any depth."""
    if isinstance(value, Mapping):
        return [c for k, v in value.items() for c in credentials(v, inside=inside or _credential_name(k))]
    if isinstance(value, list | tuple):
        return [c for v in value for c in credentials(v, inside=inside)]
    return [value] if inside and isinstance(value, str) else []


def without_credentials(value: Any, *, inside: bool = False) -> Any:
    """``value`` (a configuration) with every credential (see ``credentials``) replaced by ``[REDACTED]``."""
    if isinstance(value, Mapping):
        return {k: without_credentials(v, inside=inside or _credential_name(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_credentials(v, inside=inside) for v in value]
    return REDACTED if inside and isinstance(value, str) else value


def _credential_name(name: object) -> bool:
    return isinstance(name, str) and bool(SECRET_NAME.search(name) or CREDENTIAL_TABLE.search(name))


class Redactor:
    """Replaces every occurrence of the given secret values (longest first, so that a secret containing
    another is replaced whole)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        kept = {s for s in secrets if len(s) >= MIN_SECRET_CHARS}
        self.secrets = tuple(sorted(kept, key=len, reverse=True))

    @classmethod
    def for_agent(cls, model: ModelConfig, env_names: Iterable[str] = (),
                  environ: Mapping[str, str] = os.environ) -> Redactor:  # fmt: skip
        """The secrets an attempt of ``model`` must never store or send (see the module's docstring);
        ``env_names``: the variables of the campaign's env file."""
        values = credentials(model.params)
        names = {*env_names, *(n for n in environ if SECRET_NAME.search(n))}
        if model.api_key_env:
            names.add(model.api_key_env)
        values += [environ[n] for n in names if n in environ]
        return cls(values)

    def text(self, text: str) -> str:
        """``text`` with every secret replaced, and every lone surrogate (see the module's docstring)."""
        text = _SURROGATE.sub("\ufffd", text)
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def payload(self, value: Any) -> Any:
        """``value`` with every string in it (keys included) redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self.payload(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.payload(v) for v in value]
        return value


class RedactingLog:
    """An ``EventLog`` that redacts every payload before it is appended: nothing an attempt stores (steps,
    submissions, skills, notes, errors) can carry a secret into the store."""

    def __init__(self, inner: EventLog, redactor: Redactor) -> None:
        self.inner, self.redactor = inner, redactor

    def read_stream(self, stream_id: str) -> list[RecordedEvent]:
        return self.inner.read_stream(stream_id)

    def append(
        self, events: Iterable[NewEvent], *, expected_version: int | Mapping[str, int] | None = None
    ) -> AppendResult:
        clean = [NewEvent(e.stream_id, e.type, self.redactor.payload(e.payload), e.event_id) for e in events]
        return self.inner.append(clean, expected_version=expected_version)
