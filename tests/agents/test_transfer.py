"""Skill transfer: the source's recorded skill reaches the other arm verbatim under the neutral
header, through an optional filter; code and trajectory are withheld; no skill → skipped."""

from __future__ import annotations

import pytest
from agent_kit import TIRX_KERNEL, StubLLM, act, assert_verified_correct, of_type, stream

from mkbsim.agents import (
    CostLedger,
    SandboxConfig,
    SourceNotFinished,
    VerifierScorers,
    attempt_id_for,
    run_transfer_pair,
    run_treatment,
)
from mkbsim.campaigns import SkillTransform
from mkbsim.catalog import SKILL_HEADER, Problem
from mkbsim.events import EventStore

OPEN_QUESTION = "- Open question: vectorizing the row reduction.\n"
SOURCE_SKILL = (
    "# What I learned\n\n- Rows are independent; one pass per row suffices (measured: 5/5 draws correct).\n"
    + OPEN_QUESTION
)
SOURCE_SECRET_CODE = "# cutedsl draft 7f3a: do not leak\n"


def test_transfer_pair_hands_the_skill_to_the_other_arm(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem
) -> None:
    # the CuTe DSL source cannot be verified on this CPU machine; it gives up with an empty
    # kernel.py (a scored failure) but leaves a skill, which transfers whether or not it passed
    stub.script = [
        act(analysis="cutedsl attempt", write={"kernel.py": SOURCE_SECRET_CODE, "SKILL.md": SOURCE_SKILL}),
        act(write={"kernel.py": ""}, done=True),
        act(analysis="tirx attempt with the skill", write={"kernel.py": TIRX_KERNEL, "SKILL.md": "mine"}, done=True),
    ]
    ledger = CostLedger()
    drop = SkillTransform("drop-open-questions", lambda text: text.replace(OPEN_QUESTION, ""))
    pair = run_transfer_pair(
        store, campaign_id="c1", problem=p36, direction="cutedsl2tirx", model=stub.model("openai/gpt-4o-mini"),
        scorer_factory=scorers, sandbox=sandbox_config, ledger=ledger,
        skill_filter=drop,
    )  # fmt: skip
    source_id = attempt_id_for("c1", "stub", "p36", "solo_cutedsl", 0)
    treatment_id = attempt_id_for("c1", "stub", "p36", "cutedsl2tirx_skill", 0)
    assert pair.source.attempt_id == source_id and pair.source.status == "finished" and not pair.source.passed
    assert pair.source.skill == SOURCE_SKILL
    assert pair.treatment is not None and pair.treatment.attempt_id == treatment_id
    assert_verified_correct(store, treatment_id)

    source_events = stream(store, source_id)
    assert "kernel.py is missing or empty" in (source_events[-1].payload["reason"] or "")
    assert of_type(source_events, "VerifierResult") == []

    events = stream(store, treatment_id)
    started = events[0].payload
    assert (started["arm"], started["dsl"], started["source_attempt_id"], started["filter"]) == (
        "cutedsl2tirx_skill", "tirx", source_id, "drop-open-questions",
    )  # fmt: skip
    filtered = SOURCE_SKILL.replace(OPEN_QUESTION, "")
    (read,) = of_type(events, "SkillRead")
    assert read["text"] == filtered and read["source_attempt_id"] == source_id and len(read["sha256"]) == 64

    task = stub.ok_requests()[2][1]["content"]  # the treatment's first user message
    assert task.startswith("# Task p36: rmsnorm_h128_qwen3_30b_bf16 (TIRx variant)")
    assert SKILL_HEADER + filtered in task
    assert SOURCE_SECRET_CODE.strip() not in task and "cutedsl attempt" not in task  # code and trajectory withheld
    assert "Open question: vectorizing" not in task

    # litellm priced the calls of this known model id: per step, per attempt and in the ledger
    llm_steps = [p for p in of_type(events, "AgentStep") if p["kind"] == "llm"]
    assert all(s["cost_usd"] and s["cost_usd"] > 0 and s["tokens"] > 0 for s in llm_steps)
    total = pair.source.cost_usd + pair.treatment.cost_usd
    assert ledger.calls == 3 and ledger.spent_usd == pytest.approx(total) and ledger.unpriced_calls == 0
    assert CostLedger.from_store(store, "c1").spent_usd == pytest.approx(total)


def test_missing_skill_skips_the_treatment(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem
) -> None:
    stub.script = [act(write={"kernel.py": TIRX_KERNEL}, done=True)]  # passes, but writes no skill
    pair = run_transfer_pair(
        store, campaign_id="c2", problem=p36, direction="tirx2cutedsl", model=stub.model(),
        scorer_factory=scorers, sandbox=sandbox_config,
    )  # fmt: skip
    assert pair.source.skill is None
    assert_verified_correct(store, pair.source.attempt_id)
    assert pair.treatment is not None and pair.treatment.skipped and not pair.treatment.passed
    assert len(stub.received) == 1  # the skipped treatment never called the model
    events = stream(store, pair.treatment.attempt_id)
    assert [e.type for e in events] == ["AttemptStarted", "AttemptFinished"]
    assert events[1].payload["skipped"] and "no skill" in events[1].payload["reason"]
    assert events[0].payload["arm"] == "tirx2cutedsl_skill"


def test_a_treatment_needs_a_finished_source(
    stub: StubLLM, store: EventStore, sandbox_config: SandboxConfig, scorers: VerifierScorers, p36: Problem
) -> None:
    with pytest.raises(SourceNotFinished, match="has not run"):
        run_treatment(
            store, attempt_id="t", source_attempt_id="nope", campaign_id="c3", problem=p36,
            direction="cutedsl2tirx", model=stub.model(), scorer_factory=scorers, sandbox=sandbox_config,
        )  # fmt: skip
