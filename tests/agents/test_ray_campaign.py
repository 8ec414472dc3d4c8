"""LLM campaigns on the Ray executor, on one machine (``ray.init(num_cpus=2)``), with the stub model and
verifier actors on the cpu backend: the same attempts, statuses and event types as the local run, and a
worker killed mid-attempt is retried (its try closed as interrupted first, as a resume does)."""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
from pathlib import Path

import pytest
from agent_kit import TIRX_KERNEL, Hang, StubLLM, act, campaign_toml

from mkbsim.agents import CostLedger, LlmCampaign, RayVerifiers, VerifierSlots, load_llm_campaign
from mkbsim.campaigns import run_campaign
from mkbsim.catalog import load_catalog
from mkbsim.cli import main
from mkbsim.cli._agents import resolve_filter
from mkbsim.errors import UserError
from mkbsim.events import EventStore

ray = pytest.importorskip("ray")

# one local Ray cluster at a time: under pytest-xdist every Ray module runs in one worker, on one cluster
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray"), pytest.mark.usefixtures("local_ray")]

# every attempt writes a TIRx kernel and a skill and ends; the cpu verifier passes it as TIRx and cannot
# run CuTe DSL, so a campaign of p36 has a finished solo, two infra_error attempts (a solo and the
# treatment reading the finished solo's skill) and a treatment that never starts (its source did not finish)
REPLY = act(write={"kernel.py": TIRX_KERNEL, "SKILL.md": "- Finding: rows are independent.\n"}, done=True)


def campaign_file(tmp_path: Path, stub: StubLLM, name: str, agents: int, timeout_s: float) -> Path:
    return campaign_toml(
        tmp_path / f"{name}.toml",
        {"model": "openai/stub-model", "name": "stub", "params": {"api_base": stub.url, "api_key": "sk-stub"},
         "context_tokens": 32000, "request_timeout_s": timeout_s},
        campaign={"id": name, "problems": "p36", "env_file": tmp_path / "absent.env"},
        limits={"agents": agents, "gpu_verifier_slots": 1},
        sandbox={"root": tmp_path / name / "sandboxes", "cpus": 1},
    )  # fmt: skip


def run(tmp_path: Path, stub: StubLLM, name: str, executor: str, agents: int = 2, timeout_s: float = 60) -> EventStore:
    config = load_llm_campaign(campaign_file(tmp_path, stub, name, agents, timeout_s))
    store = EventStore(tmp_path / f"{name}.sqlite", create=True)
    scorers = RayVerifiers("cpu", "paper", 1) if executor == "ray" else VerifierSlots("cpu", "paper", 1)
    with scorers:
        run_campaign(store, LlmCampaign(config, load_catalog(), scorers), executor=executor)
    return store


def shape(store: EventStore) -> dict[str, tuple[list[str], list[str]]]:
    """Per attempt (without the campaign id): its event types and the statuses its tries ended with."""
    out: dict[str, tuple[list[str], list[str]]] = {}
    for e in store.read():
        if e.stream_id.startswith("attempt-"):
            types, statuses = out.setdefault(e.stream_id.split(".", 1)[1], ([], []))
            types.append(e.type)
            if e.type == "AttemptFinished":
                statuses.append(e.payload["status"])
    return out


def steps(store: EventStore, attempt: str) -> list[str]:
    """An attempt's events in detail (each step's kind and event, each end's reason): what a failed comparison
    shows, so that the run that differed says why."""
    out = []
    for e in store.read():
        if e.stream_id.startswith("attempt-") and e.stream_id.split(".", 1)[1] == attempt:
            p = e.payload
            why = p.get("event") or p.get("purpose") or p.get("action") or p.get("role")
            out.append(f"{e.type}({p['kind']}:{why})" if e.type == "AgentStep" else f"{e.type}({p.get('reason', '')})")
    return out


def differences(remote: EventStore, local: EventStore) -> str:
    theirs, ours = shape(remote), shape(local)
    return "\n".join(f"{a}:\n  ray:   {steps(remote, a)}\n  local: {steps(local, a)}"
                     for a in sorted(set(theirs) | set(ours)) if theirs.get(a) != ours.get(a))  # fmt: skip


def test_a_ray_run_records_what_a_local_run_records(
    tmp_path: Path, stub: StubLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    stub.script = [REPLY] * 20
    local = run(tmp_path, stub, "local", "local")
    campaign = campaign_file(tmp_path, stub, "ray", 2, 60)
    cli = ["run", "--campaign", str(campaign), "--store", str(tmp_path / "ray.sqlite"), "--executor", "ray"]
    assert main(cli) == 0, capsys.readouterr().err
    assert "attempts 1 finished, 2 infra_error" in capsys.readouterr().out
    remote = EventStore(tmp_path / "ray.sqlite")
    expected = {
        "stub.p36.solo_cutedsl.r0": ["infra_error"],
        "stub.p36.solo_tirx.r0": ["finished"],
        "stub.p36.tirx2cutedsl_skill.r0": ["infra_error"],
    }
    assert {a: statuses for a, (_, statuses) in shape(remote).items()} == expected
    assert shape(remote) == shape(local), differences(remote, local)
    pids = {e.payload["runner"]["pid"] for e in remote.read(types=["AttemptStarted"])}
    assert os.getpid() not in pids  # the attempts ran in Ray workers
    (read,) = [e.payload for e in remote.read(types=["SkillRead"])]
    assert read["source_attempt_id"] == "ray.stub.p36.solo_tirx.r0"  # the treatment read its source's skill
    for store in (local, remote):
        assert store.check().ok and store.count("CampaignFinished") == 1
        store.close()


def test_an_attempt_whose_worker_is_killed_is_closed_and_rerun(tmp_path: Path, stub: StubLLM) -> None:
    stub.script = [Hang(30), *([REPLY] * 10)]  # the first attempt's model call hangs until its worker dies
    killed: list[int] = []

    def kill_the_first_attempt() -> None:
        # once its model request hangs: killed on its AttemptStarted alone, the attempt could die before it asked,
        # and its rerun's request met the Hang instead, waiting out the 60 s request timeout
        if not stub.hanging.wait(120):
            return
        with EventStore(tmp_path / "killed.sqlite", create=True) as store:
            deadline = time.monotonic() + 60
            while not killed and time.monotonic() < deadline:
                started = [e.payload for e in store.read(types=["AttemptStarted"])]
                if started:
                    killed.append(started[0]["runner"]["pid"])
                    os.kill(killed[0], signal.SIGKILL)
                time.sleep(0.1)

    killer = threading.Thread(target=kill_the_first_attempt)
    killer.start()
    store = run(tmp_path, stub, "killed", "ray", agents=1)
    killer.join()
    first = store.read_stream("attempt-killed.stub.p36.solo_cutedsl.r0")
    starts = [e.payload for e in first if e.type == "AttemptStarted"]
    ends = [e.payload for e in first if e.type == "AttemptFinished"]
    assert len(starts) == 2 and starts[0]["runner"]["pid"] == killed[0] != starts[1]["runner"]["pid"]
    assert ends[0]["status"] == "interrupted" and "no end was recorded" in ends[0]["reason"]
    assert ends[1]["status"] == "infra_error"  # the rerun, to its end (cpu cannot verify CuTe DSL)
    statuses = {a: s for a, (_, s) in shape(store).items()}
    assert statuses["stub.p36.solo_tirx.r0"] == ["finished"] and statuses["stub.p36.tirx2cutedsl_skill.r0"]
    store.close()


def test_a_stop_signal_reaches_the_attempts_on_the_workers(tmp_path: Path, stub: StubLLM) -> None:
    stub.script = [Hang(30), *([REPLY] * 10)]  # the stop is seen when the hung request times out (2 s)

    def interrupt_once_started() -> None:
        # the first attempt's model request hanging: the attempt has started and cannot end before the stop
        # arrives (the campaign's own store is not opened here: it may still be being created)
        if stub.hanging.wait(120):
            os.kill(os.getpid(), signal.SIGINT)

    signaller = threading.Thread(target=interrupt_once_started)
    signaller.start()
    run(tmp_path, stub, "stopped", "ray", agents=1, timeout_s=2).close()
    signaller.join()
    assert stub.hanging.is_set()
    with EventStore(tmp_path / "stopped.sqlite") as store:
        statuses = {a: s for a, (_, s) in shape(store).items()}
        assert store.count("CampaignFinished") == 0  # the run stopped
    assert statuses == {"stub.p36.solo_cutedsl.r0": ["interrupted"]}  # it recorded its end; nothing else started


def test_what_ships_to_the_workers_pickles(tmp_path: Path) -> None:
    """Jobs, outcomes and the campaign's filter cross to Ray workers as pickles."""
    p36 = load_catalog().get("p36")
    again = pickle.loads(pickle.dumps(p36))  # reloaded from the worker's own problems package
    assert again == p36 and again.reference is not None
    ledger = CostLedger()
    ledger.charge(0.25, 100)
    total = CostLedger(cap_usd=0.5)
    total.add(pickle.loads(pickle.dumps(ledger)))
    total.add(ledger)
    assert total.cap_reached and total.calls == 2 and total.tokens == 200
    path = tmp_path / "filtered.toml"
    path.write_text('[campaign]\nid = "f"\nproblems = "p36"\nfilter = "drop_agenda_handoff"\n'
                    '[[agents]]\nmodel = "openai/x"\n')  # fmt: skip
    chosen = resolve_filter(path, load_llm_campaign(path))
    assert chosen is not None
    skill = "- Finding: rows are independent (5/5 draws).\n- Next, someone should try a larger tile.\n"
    assert pickle.loads(pickle.dumps(chosen.apply))(skill) == chosen.apply(skill) != skill


def test_a_scorer_factory_that_cannot_travel_is_refused_before_anything_is_stored(
    tmp_path: Path, stub: StubLLM
) -> None:
    config = load_llm_campaign(campaign_file(tmp_path, stub, "local-slots", 1, 60))
    with EventStore(tmp_path / "s.sqlite", create=True) as store, VerifierSlots("cpu", "paper", 1) as slots:
        with pytest.raises(UserError, match=r"scorer factory .* VerifierSlots cannot be pickled.*RayVerifiers"):
            run_campaign(store, LlmCampaign(config, load_catalog(), slots), executor="ray")
        assert store.count() == 0
