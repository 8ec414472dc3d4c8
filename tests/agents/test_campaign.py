"""A campaign file run through the stub LLM: the plan, the cost cap, resuming after a cap and
after infra errors, and refusing a changed plan under the same id."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from agent_kit import TIRX_KERNEL, Status, StubLLM, act, assert_verified_correct, campaign_toml, of_type, stream

from mkbsim.agents import (
    LlmCampaign,
    ModelClient,
    VerifierScorers,
    attempt_id_for,
    load_llm_campaign,
    sandbox_isolation,
)
from mkbsim.campaigns import CampaignSummary, run_campaign
from mkbsim.catalog import Catalog, load_catalog
from mkbsim.errors import UserError
from mkbsim.events import AttemptStarted, EventStore, NewEvent, attempt_stream, campaign_stream

SKILL = "- Finding: rows are independent; the weight multiply fuses into the row pass (5/5 draws correct).\n"


def campaign_file(tmp_path: Path, stub: StubLLM, *, cap: float, problems: str = "p36") -> Path:
    return campaign_toml(
        tmp_path / f"llm-{cap}.toml",
        {"model": "openai/gpt-4o-mini", "name": "mini",
         "params": {"api_base": stub.url, "api_key": "sk-stub", "max_tokens": 512},
         "max_retries": 1, "backoff_initial_s": 0.01, "backoff_max_s": 0.05},
        campaign={"id": "camp", "problems": problems, "directions": ["cutedsl2tirx"], "cost_cap_usd": cap,
                  "env_file": tmp_path / "absent.env"},
        sandbox={"root": tmp_path / "sandboxes"},
    )  # fmt: skip


def run_file(store: EventStore, catalog: Catalog, scorers: VerifierScorers, file: Path) -> CampaignSummary:
    return run_campaign(store, LlmCampaign(load_llm_campaign(file), catalog, scorers))


def ids(arm: str) -> str:
    return attempt_id_for("camp", "mini", "p36", arm, 0)


def test_cost_cap_then_resume_then_infra_error_retried(
    tmp_path: Path, stub: StubLLM, store: EventStore, scorers: VerifierScorers
) -> None:
    catalog = load_catalog()
    # 1. a cap below one call's price: the first attempt runs, then no new attempt starts
    stub.script = [act(write={"kernel.py": "", "SKILL.md": SKILL}, done=True)]
    first = run_file(store, catalog, scorers, campaign_file(tmp_path, stub, cap=1e-9))
    assert first.stopped_by_cost_cap and dict(first.statuses) == {"finished": 1}
    assert first.extra["cost_usd"] > 1e-9 and any("cost cap" in line for line in first.lines())

    # 2. a higher cap resumes: the solo kept, the TIRx solo fails on the provider, the treatment runs
    stub.script = [Status(500), Status(500), act(write={"kernel.py": TIRX_KERNEL}, done=True)]
    second = run_file(store, catalog, scorers, campaign_file(tmp_path, stub, cap=5.0))
    assert second.kept == 1 and second.statuses == {"finished": 2, "infra_error": 1}
    assert not second.stopped_by_cost_cap
    treatment = stream(store, ids("cutedsl2tirx_skill"))
    assert of_type(treatment, "SkillRead")[0]["text"] == SKILL
    assert_verified_correct(store, ids("cutedsl2tirx_skill"))

    # 3. running it again retries the infra error under the same id; finished attempts are kept
    stub.script = [act(write={"kernel.py": TIRX_KERNEL}, done=True)]
    third = run_file(store, catalog, scorers, campaign_file(tmp_path, stub, cap=5.0))
    assert third.kept == 2 and third.statuses == {"finished": 3}
    passed = sum(assert_verified_correct(store, ids(arm))["passed"] for arm in ("solo_tirx", "cutedsl2tirx_skill"))
    assert third.passed == passed
    tirx_solo = stream(store, ids("solo_tirx"))
    assert [e.payload["status"] for e in tirx_solo if e.type == "AttemptFinished"] == ["infra_error", "finished"]
    assert len([e for e in tirx_solo if e.type == "AttemptStarted"]) == 2

    # 4. nothing left to do: no model call
    calls = len(stub.received)
    fourth = run_file(store, catalog, scorers, campaign_file(tmp_path, stub, cap=5.0))
    assert fourth.kept == 3 and len(stub.received) == calls
    finishes = of_type(store.read_stream(campaign_stream("camp")), "CampaignFinished")
    assert len(finishes) == 4 and finishes[0]["counts"]["stopped_by_cost_cap"]
    counts = finishes[-1]["counts"]
    assert counts["attempts"] == {"finished": 3} and counts["passed"] == passed
    isolation = sandbox_isolation(load_llm_campaign(campaign_file(tmp_path, stub, cap=5.0)).sandbox)
    assert (counts["network_isolated"], counts["network_detail"]) == (isolation.isolated, isolation.detail)

    # the same campaign id with another plan is refused
    with pytest.raises(UserError, match="different plan"):
        run_file(store, catalog, scorers, campaign_file(tmp_path, stub, cap=5.0, problems="p28"))


def test_a_try_killed_without_an_end_is_closed_as_interrupted_and_rerun(
    tmp_path: Path, stub: StubLLM, store: EventStore, scorers: VerifierScorers
) -> None:
    config = load_llm_campaign(campaign_file(tmp_path, stub, cap=1e-9))
    killed = AttemptStarted(
        attempt_id=ids("solo_cutedsl"), campaign_id="camp", model="mini", problem="p36", family="mlp_norm",
        dsl="cutedsl", arm="solo_cutedsl", replicate=0, budget={"minutes": 40, "submissions": 10},
    )  # fmt: skip
    store.append([NewEvent.of(attempt_stream(killed.attempt_id), killed)])
    stub.script = [act(write={"kernel.py": "", "SKILL.md": SKILL}, done=True)]
    summary = run_campaign(store, LlmCampaign(config, load_catalog(), scorers))
    assert summary.statuses == {"finished": 1} and summary.stopped_by_cost_cap
    events = stream(store, ids("solo_cutedsl"))
    assert [e.type for e in events].count("AttemptStarted") == 2
    ends = [(e.payload["status"], e.payload["reason"]) for e in events if e.type == "AttemptFinished"]
    assert ends[0] == ("interrupted", "no end was recorded (the run was killed); rerun")
    assert ends[1][0] == "finished"


def test_a_stop_signal_ends_the_attempt_in_flight_as_interrupted(
    tmp_path: Path, stub: StubLLM, store: EventStore, scorers: VerifierScorers
) -> None:
    class Stopped(ModelClient):
        def complete(self, *args: Any, **kwargs: Any) -> Any:
            os.kill(os.getpid(), signal.SIGTERM)  # e.g. a cluster scheduler preempting the campaign
            time.sleep(5)

    config = load_llm_campaign(campaign_file(tmp_path, stub, cap=5.0))
    before = signal.getsignal(signal.SIGTERM)  # not always SIG_DFL: ray.init (earlier tests) installs its own
    stopped = run_campaign(store, LlmCampaign(config, load_catalog(), scorers, client_factory=Stopped))
    assert stopped.stopped_by == "SIGTERM"
    ends = [e.payload for e in stream(store, ids("solo_cutedsl")) if e.type == "AttemptFinished"]
    assert [e["status"] for e in ends] == ["interrupted"]
    assert signal.getsignal(signal.SIGTERM) is before  # restored
