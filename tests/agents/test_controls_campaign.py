"""Control arms (DESIGN §4) in an LLM campaign, with real HTTP to the stub model server: the A/A attempt is a
second solo, the placebo reads the other problem's skill of the family, the matched control a neutral note as
long as the skill, each under the same header, paired with the treatment's baseline; the controls are part of
the campaign's plan."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agent_kit import StubLLM, act, campaign_toml

from mkbsim.agents import LlmCampaign, Verdict, load_llm_campaign
from mkbsim.campaigns import run_campaign
from mkbsim.catalog import SKILL_HEADER, Problem, load_catalog
from mkbsim.claims import segment
from mkbsim.errors import UserError
from mkbsim.events import EventStore
from mkbsim.projections import ProjectionEngine, default_projections

KERNEL = "def run(*inputs):\n    return inputs[0]\n"
ARMS = ("solo_cutedsl", "solo_tirx", *(f"tirx2cutedsl_{k}" for k in ("skill", "aa", "placebo", "matched")))


@dataclass(frozen=True)
class PassingScorer:
    """Passes every kernel (the verifier is not what this test is about)."""

    problem: Problem
    dsl: str

    def score(self, kernel_path: Path, *, attempt_id: str, submission: int | str) -> Verdict:
        payload = {
            "attempt_id": attempt_id, "submission": submission, "backend": "fake", "protocol": "paper",
            "passed": True, "correct": True, "runtime_ms": 1.0, "eager_ms": 2.0, "speedup": 2.0, "bypass_ok": True,
            "forbidden": [], "inline_cuda": False, "failure": None, "details": {}, "env": {},
        }  # fmt: skip
        return Verdict(payload, "passed")


def campaign_file(tmp_path: Path, stub: StubLLM, **campaign: Any) -> Path:
    return campaign_toml(
        tmp_path / "controls.toml",
        {"model": "openai/stub-model", "name": "stub", "context_tokens": 32000,
         "params": {"api_base": stub.url, "api_key": "sk-stub"}},
        campaign={"id": "ctl", "problems": "p36,p28", "directions": ["tirx2cutedsl"], "env_file": tmp_path / "n.env",
                  **campaign},
        sandbox={"root": tmp_path / "sandboxes", "cpus": 1},
    )  # fmt: skip


def test_control_arms_of_an_llm_campaign(tmp_path: Path, stub: StubLLM) -> None:
    # every attempt writes a kernel and a skill of its own (the n-th reply's), and ends
    stub.script = [act(write={"kernel.py": KERNEL, "SKILL.md": f"- Finding {n}: rows are independent (measured).\n"},
                       done=True) for n in range(12)]  # fmt: skip
    config = load_llm_campaign(campaign_file(tmp_path, stub, controls=["aa", "placebo", "matched"]))
    assert config.controls == ("aa", "placebo", "matched")
    with EventStore(tmp_path / "ctl.sqlite", create=True) as store:
        summary = run_campaign(store, LlmCampaign(config, load_catalog(), PassingScorer))
        assert summary.statuses == {"finished": 12} and summary.skipped == 0
        started = {e.payload["attempt_id"]: e.payload for e in store.read(types=["AttemptStarted"])}
        read = {e.payload["attempt_id"]: e.payload for e in store.read(types=["SkillRead"])}
        written = {e.payload["attempt_id"]: e.payload["text"] for e in store.read(types=["SkillWritten"])}
        ProjectionEngine(store, default_projections()).catch_up()
        controls = store.connection.execute(
            "SELECT problem, arm, baseline_attempt_id FROM control_comparisons WHERE resolved = 1").fetchall()
        # the controls are part of the plan: the same campaign id without them is another plan
        plain = load_llm_campaign(campaign_file(tmp_path, stub))
        with pytest.raises(UserError, match="different plan"):
            run_campaign(store, LlmCampaign(plain, load_catalog(), PassingScorer))
    by_arm: dict[tuple[str, str], dict[str, Any]] = {(s["problem"], s["arm"]): s for s in started.values()}
    assert set(by_arm) == {(p, arm) for p in ("p28", "p36") for arm in ARMS}
    tasks = [r.messages[1]["content"] for r in stub.received if r.status == 200]
    for problem, other in (("p36", "p28"), ("p28", "p36")):
        aa, placebo, matched = (by_arm[problem, f"tirx2cutedsl_{k}"] for k in ("aa", "placebo", "matched"))
        source, donor = by_arm[problem, "solo_tirx"], by_arm[other, "solo_tirx"]
        # A/A: a second solo in the target DSL, reading nothing
        assert aa["dsl"] == "cutedsl" and aa["source_attempt_id"] is None and aa["attempt_id"] not in read
        # placebo: the other problem's skill of the family, in the source DSL, under the same header
        got = read[placebo["attempt_id"]]
        assert placebo["source_problem"] == got["source_problem"] == other
        assert got["source_attempt_id"] == donor["attempt_id"] and got["text"] == written[donor["attempt_id"]]
        # matched: a neutral note as long as (and with as many sentences as) the skill the treatment reads
        note, skill = read[matched["attempt_id"]]["text"], written[source["attempt_id"]]
        assert read[matched["attempt_id"]]["neutral_note"] and note != skill
        assert len(note) == len(skill) and len(segment(note)) == len(segment(skill))
        for text in (got["text"], note):
            assert any(SKILL_HEADER + text in task for task in tasks)  # what the agent was shown
    baselines = {(s["problem"], s["arm"]): s["attempt_id"] for s in started.values()}
    assert sorted(controls) == sorted((p, k, baselines[p, "solo_cutedsl"]) for p in ("p28", "p36")
                                      for k in ("aa", "placebo", "matched"))  # fmt: skip
