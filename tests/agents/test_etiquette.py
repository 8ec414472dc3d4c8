"""Provider etiquette and the parent's secrets, piece by piece: the wait a provider asks for, a wait too long
to honour, a stop during a hanging request, redaction and the reply cap (the whole campaign: test_escapes.py)."""

from __future__ import annotations

import email.utils
import threading
import time
from types import SimpleNamespace

import pytest
from agent_kit import Hang, Status, StubLLM, act

from mkbsim.agents import Completion, ModelClient, ModelConfig, ModelUnavailable
from mkbsim.agents._model import retry_after_s
from mkbsim.agents._secrets import REDACTED, Redactor


def failed(**headers: str) -> Exception:
    exc = Exception("429")
    exc.response = SimpleNamespace(headers=headers)  # type: ignore[attr-defined]
    return exc


def test_retry_after_headers_in_their_order_of_precedence() -> None:
    assert retry_after_s(failed(**{"retry-after-ms": "1500", "retry-after": "9"})) == 1.5
    assert retry_after_s(failed(**{"retry-after": "3"})) == 3.0
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= (retry_after_s(failed(**{"retry-after": when})) or 0) <= 30
    resets = {"x-ratelimit-reset-requests": "1m2.5s", "x-ratelimit-reset-tokens": "20ms"}
    assert retry_after_s(failed(**resets)) == 62.5
    assert retry_after_s(failed(**{"retry-after": "soon"})) is None
    assert retry_after_s(Exception("no response")) is None


def complete(stub: StubLLM, stopped: threading.Event | None = None, **overrides: object) -> Completion:
    client = ModelClient(stub.model(**overrides))
    stop = stopped or threading.Event()
    return client.complete([{"role": "user", "content": "hi"}], time_left=lambda: 600.0, on_retry=lambda _: None,
                           stopped=stop.is_set)  # fmt: skip


def test_a_provider_asking_for_a_longer_wait_than_backoff_max_is_not_hammered(stub: StubLLM) -> None:
    stub.script = [Status(429, "later", headers=(("Retry-After", "600"),)), act(done=True)]
    with pytest.raises(ModelUnavailable, match=r"asks to wait 600 s \(more than backoff_max_s 0.2\)"):
        complete(stub)
    assert len(stub.received) == 1


def test_retry_after_is_waited_for(stub: StubLLM) -> None:
    stub.script = [Status(429, "later", headers=(("retry-after-ms", "1200"),)), act(done=True)]
    complete(stub, backoff_max_s=5.0)
    assert [r.status for r in stub.received] == [429, 200]
    assert stub.received[1].at - stub.received[0].at >= 1.2


@pytest.mark.parametrize("wait", ["request", "retry"])
def test_a_stop_ends_a_hanging_request_or_a_retry_wait_at_once(stub: StubLLM, wait: str) -> None:
    stub.script = [Hang(30)] if wait == "request" else [Status(429, "later", headers=(("Retry-After", "20"),))]
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        complete(stub, stop, backoff_max_s=60.0, request_timeout_s=60.0)
    assert time.monotonic() - t0 < 1.5


def test_redaction_covers_keys_params_env_file_and_credential_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_AGENT_KEY", "sk-agent-0123456789")
    monkeypatch.setenv("LAB_DB", "db-from-env-file-xyz")
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnop")
    monkeypatch.setenv("SHORT_TOKEN", "1")
    monkeypatch.setenv("DATA_DIR", "/usr/local/share/data")
    model = ModelConfig("openai/x", params={"api_key": "sk-param-abcdefgh", "max_tokens": 123456789},
                        api_key_env="MY_AGENT_KEY")  # fmt: skip
    redact = Redactor.for_agent(model, env_names=("LAB_DB",))
    text = "sk-agent-0123456789 sk-param-abcdefgh db-from-env-file-xyz hf_abcdefghijklmnop 1 /usr/local/share/data"
    assert redact.text(text) == f"{REDACTED} {REDACTED} {REDACTED} {REDACTED} 1 /usr/local/share/data"
    assert redact.payload({"a": [text, 3], "sk-agent-0123456789": None}) == {
        "a": [redact.text(text), 3], REDACTED: None,
    }  # fmt: skip
    assert "123456789" not in redact.secrets  # max_tokens is not a credential


def test_a_reply_is_redacted_before_it_is_capped() -> None:
    reply = Completion("key sk-secret-value " + "x" * 100, 1, 1, None, "stop", 0.1, None)
    capped = reply.capped(30, Redactor(["sk-secret-value"]).text)
    assert capped.text == f"key {REDACTED} " + "x" * 15 and capped.truncated_from_chars == 115
    assert capped.truncation() == {"truncated_from_chars": 115}
    assert reply.capped(1000).truncation() == {}
