"""LLM campaigns with several attempts at once (``[limits] agents``) and a verifier-slot limit
(``[limits] gpu_verifier_slots``), on a scripted model and a fake verifier that log when they run:
attempts overlap, scorings never exceed the slots, treatments wait for their sources, the events
equal a sequential run's, and a run stopped by a signal resumes to the same result."""

from __future__ import annotations

import json
import os
import signal
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from agent_kit import campaign_toml

from mkbsim.agents import (
    Completion,
    LlmCampaign,
    ModelClient,
    Verdict,
    load_llm_campaign,
)
from mkbsim.campaigns import SkillTransform, run_campaign
from mkbsim.catalog import Problem, load_catalog
from mkbsim.errors import UserError
from mkbsim.events import EventStore, RecordedEvent

SKILL = "- Finding: rows are independent (5/5 draws correct).\n- Open question: tile size.\n"
KERNEL = "def run(*inputs):\n    return inputs[0]\n"
MODEL_S = 0.4  # each model call takes this long: long enough for overlaps to be unmistakable
SCORE_S = 0.25

# p36 and p28: 2 problems x (2 solos + 2 treatments) = 8 attempts
ATTEMPTS = 8


@dataclass
class Log:
    """Entry/exit times of model calls and scorings, by attempt."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    scorings: list[tuple[str, float, float]] = field(default_factory=list)
    calls: int = 0
    interrupt_at_call: int | None = None  # send SIGINT to ourselves at this call (1-based)

    def count_call(self) -> int:
        with self.lock:
            self.calls += 1
            return self.calls


def client_factory(log: Log) -> type[ModelClient]:
    class Scripted(ModelClient):
        """Writes a kernel and a skill, submits once and ends; the same reply for every attempt."""

        def complete(self, messages: Sequence[Any], **kwargs: Any) -> Completion:
            n = log.count_call()
            if log.interrupt_at_call == n:
                os.kill(os.getpid(), signal.SIGINT)
            time.sleep(MODEL_S)
            reply = {"write": {"kernel.py": KERNEL, "SKILL.md": SKILL}, "submit": True, "done": True}
            return Completion(json.dumps(reply), 100, 20, 0.001, "stop", MODEL_S, "scripted")

    return Scripted


@dataclass(frozen=True)
class FakeScorer:
    log: Log
    problem: Problem
    dsl: str

    def score(self, kernel_path: Path, *, attempt_id: str, submission: int | str) -> Verdict:
        enter = time.monotonic()
        time.sleep(SCORE_S)
        passed = self.dsl == "tirx"  # deterministic, and differs by arm
        payload = {
            "attempt_id": attempt_id, "submission": submission, "backend": "fake", "protocol": "paper",
            "passed": passed, "correct": passed, "runtime_ms": 1.0 if passed else None, "eager_ms": 2.0,
            "speedup": 2.0 if passed else None, "bypass_ok": True, "forbidden": [], "inline_cuda": False,
            "failure": None if passed else "incorrect", "details": {}, "env": {},
        }  # fmt: skip
        with self.log.lock:
            self.log.scorings.append((attempt_id, enter, time.monotonic()))
        return Verdict(payload, "passed" if passed else "incorrect")


def campaign_file(tmp_path: Path, name: str, *, agents: int, slots: int, **campaign: Any) -> Path:
    return campaign_toml(
        tmp_path / f"{name}.toml",
        {"model": "openai/scripted", "name": "scripted", "context_tokens": 32000,
         "params": {"api_base": "http://127.0.0.1:9/v1", "api_key": "sk-unused"}},
        campaign={"id": "conc", "problems": "p36,p28", "env_file": tmp_path / "absent.env", **campaign},
        limits={"agents": agents, "gpu_verifier_slots": slots},
        sandbox={"root": tmp_path / name / "sandboxes", "cpus": 1},
    )  # fmt: skip


def run(tmp_path: Path, name: str, log: Log, **kwargs: Any) -> tuple[EventStore, Any]:
    config = load_llm_campaign(campaign_file(tmp_path, name, **kwargs))
    store = EventStore(tmp_path / f"{name}.sqlite", create=True)
    summary = run_campaign(
        store, LlmCampaign(config, load_catalog(), lambda p, d: FakeScorer(log, p, d), client_factory(log))
    )
    return store, summary


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])  # ends sort before starts
    at_once = most = 0
    for _, step in edges:
        at_once += step
        most = max(most, at_once)
    return most


def attempt_events(store: EventStore) -> dict[str, list[RecordedEvent]]:
    out: dict[str, list[RecordedEvent]] = {}
    for e in store.read():
        if e.stream_id.startswith("attempt-"):
            out.setdefault(e.stream_id, []).append(e)
    return out


_VOLATILE = {"elapsed_s", "latency_s", "sandbox", "duration_s", "infra_stall_s"}


def normalized(store: EventStore, latest_try_only: bool = False) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Each attempt's events without what differs run to run (times, sandbox paths and cores)."""
    out = {}
    for stream, events in attempt_events(store).items():
        if latest_try_only:
            starts = [i for i, e in enumerate(events) if e.type == "AttemptStarted"]
            events = events[starts[-1] :]
        out[stream] = [(e.type, {k: v for k, v in e.payload.items() if k not in _VOLATILE}) for e in events]
    return out


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_concurrent_attempts_overlap_respect_slots_and_sources_and_match_a_sequential_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the core locks in a folder of this test's own: other processes on a shared machine may hold every core of
    # the per-user folder, and then all attempts (rightly) share (holding across processes: test_cores.py)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    log = Log()
    store, summary = run(tmp_path, "conc", log, agents=3, slots=2)
    assert summary.statuses == {"finished": ATTEMPTS} and summary.passed == 4  # the tirx-target attempts

    events = attempt_events(store)
    assert len(events) == ATTEMPTS
    spans = {}
    for stream, evs in events.items():
        (start,) = [e for e in evs if e.type == "AttemptStarted"]
        (end,) = [e for e in evs if e.type == "AttemptFinished"]
        spans[stream] = (start, end)
    # (a) attempts really ran at once: three solos' spans overlap (4 solos are ready at the start)
    times = [(datetime.fromisoformat(s.recorded_at).timestamp(), datetime.fromisoformat(e.recorded_at).timestamp())
             for s, e in spans.values()]  # fmt: skip
    assert max_overlap(times) == 3
    # (b) never more than 2 verifications at once (2 per attempt: the submission and the final kernel)
    assert len(log.scorings) == 2 * ATTEMPTS
    assert max_overlap([(a, b) for _, a, b in log.scorings]) <= 2
    # (c) every treatment started after its source finished (store positions are the global order)
    for stream, (start, _) in spans.items():
        source = start.payload["source_attempt_id"]
        if source is not None:
            assert start.position > spans[f"attempt-{source}"][1].position, stream

    # (e) attempts running at once got different cores while the machine had enough (3 at once, cpus = 1)
    span_of = {k: (datetime.fromisoformat(s.recorded_at), datetime.fromisoformat(e.recorded_at))
               for k, (s, e) in spans.items()}  # fmt: skip
    cores = {k: tuple(s.payload["sandbox"]["cpus"]) for k, (s, _) in spans.items()}
    at_once = [
        (a, b)
        for a in spans
        for b in spans
        if a < b and span_of[a][0] < span_of[b][1] and span_of[b][0] < span_of[a][1]
    ]
    different = [cores[a] != cores[b] for a, b in at_once]
    assert at_once and (all(different) if len(os.sched_getaffinity(0)) >= 3 else any(different)), (at_once, cores)

    # (d) the same events as one attempt at a time, modulo ids, timestamps and order
    seq_log = Log()
    sequential, seq_summary = run(tmp_path, "seq", seq_log, agents=1, slots=1)
    assert normalized(sequential) == normalized(store)
    assert seq_summary.statuses == summary.statuses and seq_summary.passed == summary.passed
    assert max_overlap([(a, b) for _, a, b in seq_log.scorings]) == 1
    for s in (store, sequential):
        assert s.check().ok
        s.close()


def test_a_stop_signal_interrupts_the_attempts_in_flight_and_the_campaign_resumes(tmp_path: Path) -> None:
    log = Log(interrupt_at_call=2)
    before = signal.getsignal(signal.SIGINT)
    stopped, summary = run(tmp_path, "stopped", log, agents=3, slots=2)
    stopped.close()
    assert summary.stopped_by == "SIGINT"
    assert signal.getsignal(signal.SIGINT) is before  # restored
    with EventStore(tmp_path / "stopped.sqlite") as store:
        streams = attempt_events(store)
        latest = {s: [e.payload for e in evs if e.type == "AttemptFinished"] for s, evs in streams.items()}
    assert 1 <= len(latest) <= 3  # only what was in flight had started; nothing new started after the signal
    # each recorded its end
    assert all(ends and ends[-1]["status"] == "interrupted" for ends in latest.values()), latest

    store, summary = run(tmp_path, "stopped", Log(), agents=3, slots=2)
    assert summary.statuses == {"finished": ATTEMPTS} and summary.kept == 0
    reference, _ = run(tmp_path, "reference", Log(), agents=3, slots=2)
    assert normalized(store, latest_try_only=True) == normalized(reference)
    assert store.check().ok
    store.close()
    reference.close()


def test_a_campaign_filter_transforms_the_transferred_skill_and_is_part_of_the_plan(tmp_path: Path) -> None:
    shout = SkillTransform("shout", lambda text: text.upper())
    config = load_llm_campaign(
        campaign_file(tmp_path, "filtered", agents=2, slots=1, filter="shout", directions=["cutedsl2tirx"])
    )
    assert config.filter == "shout"
    log = Log()
    with EventStore(tmp_path / "filtered.sqlite", create=True) as store:
        with pytest.raises(UserError, match=r"campaign\.filter is shout but the filter given is none"):
            run_campaign(store, LlmCampaign(config, load_catalog(), lambda p, d: FakeScorer(log, p, d)))
        summary = run_campaign(store, LlmCampaign(config, load_catalog(), lambda p, d: FakeScorer(log, p, d),
                                                  client_factory(log)), skill_filter=shout)  # fmt: skip
        assert summary.statuses == {"finished": 6}
        reads = [e.payload for e in store.read(types=["SkillRead"])]
        assert len(reads) == 2 and all(r["text"] == SKILL.upper() and r["filter"] == "shout" for r in reads)
        started = [e.payload for e in store.read(types=["AttemptStarted"]) if e.payload["source_attempt_id"]]
        assert [s["filter"] for s in started] == ["shout", "shout"]
        # the filter is part of the plan: another filter (or none) under the same id is refused
        plain = load_llm_campaign(campaign_file(tmp_path, "plain", agents=2, slots=1, directions=["cutedsl2tirx"]))
        with pytest.raises(UserError, match="different plan"):
            run_campaign(store, LlmCampaign(plain, load_catalog(), lambda p, d: FakeScorer(log, p, d)))
