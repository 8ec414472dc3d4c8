"""Test kit of the agent tests: an OpenAI-compatible stub server on 127.0.0.1 with scripted replies
(real HTTP: litellm reaches it through its `openai/` provider and `api_base`), kernels for p36,
campaign files, and event helpers."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from mkbsim.agents import ModelConfig
from mkbsim.events import EventStore, RecordedEvent, attempt_stream

SUMMARY_TEXT = "SUMMARY: the agent inspected the docs and wrote kernel.py; nothing submitted yet."

# -- scripted actions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """A 200 answer whose message content is ``text`` (any text: JSON, prose, garbage)."""

    text: str
    finish_reason: str = "stop"


@dataclass(frozen=True)
class Status:
    """An HTTP error answer, e.g. 429 or 500, with extra response headers (e.g. ``Retry-After``)."""

    code: int
    message: str = "scripted failure"
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Hang:
    """No answer for ``seconds`` (the client's timeout should fire first)."""

    seconds: float


def act(**reply: Any) -> Reply:
    """A well-formed agent reply (one JSON object)."""
    return Reply(json.dumps(reply))


@dataclass
class Received:
    body: dict[str, Any]
    status: int
    authorization: str = ""
    at: float = field(default_factory=time.monotonic)  # when the request arrived

    @property
    def messages(self) -> list[dict[str, str]]:
        return [{"role": m["role"], "content": m["content"]} for m in self.body["messages"]]


@dataclass
class StubLLM:
    """Answers chat completions from a script, one action per request, and logs every request.

    Summary requests (the agent's context management) are answered with ``SUMMARY_TEXT`` without
    consuming the script. When the script runs out the stub answers 400, which the agent treats
    as an infrastructure failure: a test that scripted too little fails loudly.
    """

    script: list[Reply | Status | Hang] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)
    hanging: threading.Event = field(default_factory=threading.Event)  # set when a Hang starts

    def next_action(self, body: dict[str, Any]) -> Reply | Status | Hang:
        if body["messages"][0]["content"].startswith("You condense"):
            return Reply(SUMMARY_TEXT)
        with self.lock:
            return self.script.pop(0) if self.script else Status(400, "stub script exhausted")

    def ok_requests(self) -> list[list[dict[str, str]]]:
        return [r.messages for r in self.received if r.status == 200]

    def model(
        self, model: str = "openai/stub-model", params: dict[str, Any] | None = None, **overrides: Any
    ) -> ModelConfig:
        settings: dict[str, Any] = {
            "request_timeout_s": 20.0, "max_retries": 2, "backoff_initial_s": 0.05, "backoff_max_s": 0.2,
        }  # fmt: skip
        settings.update(overrides)
        params = {"api_base": self.url, "api_key": "sk-stub-secret", "temperature": 0.0, **(params or {})}
        return ModelConfig(model=model, params=params, name="stub", **settings)


def _handler(stub: StubLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, code: int, payload: dict[str, Any], headers: tuple[tuple[str, str], ...] = ()) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            arrived = time.monotonic()
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            action = stub.next_action(body)
            if isinstance(action, Hang):
                stub.hanging.set()
                time.sleep(action.seconds)
                stub.received.append(Received(body, 0, self.headers.get("Authorization", ""), arrived))
                return
            if isinstance(action, Status):
                stub.received.append(Received(body, action.code, self.headers.get("Authorization", ""), arrived))
                error = {"error": {"message": action.message, "type": "scripted", "code": None}}
                self._send(action.code, error, action.headers)
                return
            stub.received.append(Received(body, 200, self.headers.get("Authorization", ""), arrived))
            prompt = sum(len(m["content"]) for m in body["messages"]) // 4
            completion = len(action.text) // 4
            self._send(200, {
                "id": f"chatcmpl-{len(stub.received)}", "object": "chat.completion", "created": int(time.time()),
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": action.text},
                             "finish_reason": action.finish_reason}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion},
            })  # fmt: skip

    return Handler


@contextmanager
def serve(stub: StubLLM) -> Iterator[StubLLM]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    stub.url = f"http://127.0.0.1:{server.server_port}/v1"
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()


# -- processes -------------------------------------------------------------------------------------


def orphan_name() -> str:
    """A unique process name for a test's background process (``exec -a NAME``)."""
    return f"mkbsim-orphan-{uuid.uuid4().hex[:10]}"


def named(name: str) -> list[int]:
    """Host processes whose argv[0] is ``name``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().split(b"\0")[0] == name.encode():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def gone(name: str, seconds: float = 5.0) -> bool:
    """Whether no process named ``name`` is left (waiting up to ``seconds`` for the kernel's teardown)."""
    deadline = time.monotonic() + seconds
    while named(name) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not named(name)


# -- campaign files ----------------------------------------------------------------------------


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str | Path):
        return json.dumps(str(value))  # a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def campaign_toml(path: Path, agent: dict[str, Any], **tables: dict[str, Any]) -> Path:
    """Write an LLM campaign file: the given tables (``campaign``, ``limits``, ``sandbox``...; the verifier
    on the cpu backend unless given) and one ``[[agents]]`` entry."""
    tables = {"verifier": {"backend": "cpu"}, **tables}
    lines = []
    for name, keys in tables.items():
        lines += [f"[{name}]", *(f"{k} = {toml_value(v)}" for k, v in keys.items()), ""]
    lines += ["[[agents]]", *(f"{k} = {toml_value(v)}" for k, v in agent.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def stream(store: EventStore, attempt_id: str) -> list[RecordedEvent]:
    return store.read_stream(attempt_stream(attempt_id))


def of_type(events: list[RecordedEvent], type_: str) -> list[dict[str, Any]]:
    return [e.payload for e in events if e.type == type_]


def steps(events: list[RecordedEvent], kind: str) -> list[dict[str, Any]]:
    return [p for p in of_type(events, "AgentStep") if p["kind"] == kind]


# p36 in TIRx for the llvm target: eager PyTorch computes each row's inverse RMS, a TIRx kernel
# applies it and the weight. The decorative variant launches the same kernel but returns an eager
# result, so the verifier's bypass test must reject it.
TIRX_KERNEL = """\
import torch
import tvm
from tvm.script import tirx as T


@T.prim_func
def scale_rows(x_ptr: T.handle, inv_ptr: T.handle, w_ptr: T.handle, out_ptr: T.handle):
    rows = T.int32()
    x = T.match_buffer(x_ptr, (rows, 128), "bfloat16")
    inv = T.match_buffer(inv_ptr, (rows,), "float32")
    w = T.match_buffer(w_ptr, (128,), "bfloat16")
    out = T.match_buffer(out_ptr, (rows, 128), "bfloat16")
    for i, j in T.grid(rows, 128):
        out[i, j] = T.Cast("bfloat16", T.Cast("float32", x[i, j]) * inv[i] * T.Cast("float32", w[j]))


_scale_rows = tvm.compile(scale_rows, target="llvm")


def run(hidden_states, weight):
    inv_rms = torch.rsqrt(hidden_states.float().pow(2).mean(dim=-1) + 1e-6)
    out = torch.empty_like(hidden_states)
    _scale_rows(hidden_states, inv_rms, weight, out)
    return out
"""

DECORATIVE_KERNEL = TIRX_KERNEL.replace(
    "    return out\n",
    "    x = hidden_states.float()\n"
    "    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()).to(torch.bfloat16)\n",
)


def verdicts(store: EventStore, attempt_id: str) -> str:
    """The attempt's end and its verifier results, for assertion messages."""
    events = stream(store, attempt_id)
    lines = [f"{e.payload['submission']}: {e.payload['failure']} {e.payload.get('feedback', '')}" for e in events
             if e.type == "VerifierResult"]  # fmt: skip
    return f"{events[-1].payload.get('reason')} | " + " | ".join(lines)


def final_result(store: EventStore, attempt_id: str) -> dict[str, Any]:
    (final,) = [p for p in of_type(stream(store, attempt_id), "VerifierResult") if p["submission"] == "final"]
    return final


def assert_verified_correct(store: EventStore, attempt_id: str) -> dict[str, Any]:
    """The final kernel was verified correct and the attempt's end carries the verifier's verdict.

    Whether it also *passed* depends on the verifier's timing cross-check too, which a heavily loaded
    CPU machine can trip (``timing_tamper``); that is the verifier's business, not the agent loop's.
    """
    final = final_result(store, attempt_id)
    assert final["correct"], verdicts(store, attempt_id)
    finished = stream(store, attempt_id)[-1].payload
    assert finished["status"] == "finished" and finished["passed"] == final["passed"]
    assert finished["speedup"] == (final["speedup"] if final["passed"] else None)
    return final
