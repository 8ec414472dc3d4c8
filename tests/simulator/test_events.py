"""Simulated campaigns emit exactly the event types of a real one (DESIGN §3), valid and complete."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from pathlib import Path

from mkbsim.campaigns import CampaignSummary
from mkbsim.claims import segment
from mkbsim.events import EventStore, RecordedEvent, campaign_stream
from mkbsim.simulator import CampaignConfig

CORE_TYPES = {
    "CampaignStarted", "AttemptStarted", "AgentStep", "SubmissionMade", "VerifierResult", "SkillWritten",
    "SkillRead", "AttemptFinished", "LabelAssigned", "CampaignFinished",
}  # fmt: skip
VERIFIER_FAILURES = {"compile_error", "wrong_output", "timeout", "not_dsl"}


def _attempts(path: Path) -> dict[str, list[RecordedEvent]]:
    streams: dict[str, list[RecordedEvent]] = defaultdict(list)
    with EventStore(path) as store:
        for ev in store.read():
            if ev.stream_id.startswith("attempt-"):
                streams[ev.stream_id].append(ev)
    return streams


def test_the_store_checks_clean_and_holds_only_core_types(small_campaign: tuple[Path, CampaignSummary]) -> None:
    path, summary = small_campaign
    with EventStore(path) as store:
        report = store.check()
        assert report.ok, report.problem
        assert set(store.type_counts()) <= CORE_TYPES
        assert store.count() == summary.events
        campaign = [ev.type for ev in store.read(stream_id=campaign_stream(summary.campaign_id))]
    assert campaign == ["CampaignStarted", "CampaignFinished"]


def test_every_attempt_is_a_complete_protocol_run(
    small_campaign: tuple[Path, CampaignSummary], small_config: CampaignConfig
) -> None:
    path, summary = small_campaign
    streams = _attempts(path)
    assert len(streams) == summary.attempts == len(small_config.profiles) * len(small_config.problems) * 4
    for events in streams.values():
        types = [ev.type for ev in events]
        start, finish = events[0].payload, events[-1].payload
        assert types[0] == "AttemptStarted" and types[-1] == "AttemptFinished"
        if finish["skipped"]:
            assert start["arm"].endswith("_skill") and types == ["AttemptStarted", "AttemptFinished"]
            continue
        verdicts = [ev.payload for ev in events if ev.type == "VerifierResult"]
        submissions = [ev.payload for ev in events if ev.type == "SubmissionMade"]
        assert [v["submission"] for v in verdicts] == [s["submission"] for s in submissions] + ["final"]
        assert len(submissions) <= 10 and all(s["counted"] for s in submissions)
        for s in submissions:
            assert s["code_sha256"] == hashlib.sha256(s["code"].encode()).hexdigest()
        for v in verdicts:
            assert v["backend"] == "analytic" and v["protocol"] == "paper"
            assert v["passed"] == (v["failure"] is None)
            assert v["failure"] is None or v["failure"] in VERIFIER_FAILURES
        assert finish["passed"] == verdicts[-1]["passed"] and finish["runtime_ms"] == verdicts[-1]["runtime_ms"]
        clock = [ev.payload["elapsed_s"] for ev in events if ev.type == "AgentStep"]
        assert clock == sorted(clock) and clock[-1] <= 40 * 60
        assert {ev.payload["kind"] for ev in events if ev.type == "AgentStep"} >= {"llm", "command", "observation"}
        reads = [ev.payload for ev in events if ev.type == "SkillRead"]
        assert len(reads) == (1 if start["arm"].endswith("_skill") else 0)


def test_treatments_read_their_source_skill_under_the_neutral_header(
    small_campaign: tuple[Path, CampaignSummary],
) -> None:
    from mkbsim.catalog import SKILL_HEADER

    streams = _attempts(Path(small_campaign[0]))
    written = {ev.payload["attempt_id"]: ev.payload["text"] for evs in streams.values() for ev in evs
               if ev.type == "SkillWritten"}  # fmt: skip
    skipped = 0
    for events in streams.values():
        start = events[0].payload
        if not start["arm"].endswith("_skill"):
            continue
        source = start["source_attempt_id"]
        read = [ev.payload for ev in events if ev.type == "SkillRead"]
        if source not in written:
            skipped += 1
            assert events[-1].payload["skipped"] and not read
        else:
            assert read[0]["text"] == SKILL_HEADER + written[source] and read[0]["filter"] is None
            assert read[0]["source_attempt_id"] == source
    assert skipped > 0  # some profiles leave no skill when they run out of time


def test_ground_truth_labels_cover_every_sentence_of_every_skill(small_campaign: tuple[Path, CampaignSummary]) -> None:
    for events in _attempts(Path(small_campaign[0])).values():
        skills = [ev.payload for ev in events if ev.type == "SkillWritten"]
        labels = [ev.payload for ev in events if ev.type == "LabelAssigned" and ev.payload["subject"] == "skill"]
        assert len(labels) == len(skills)
        for skill, label in zip(skills, labels, strict=True):
            assert label["labeler"] == "ground_truth" and label["labels"]["sha256"] == skill["sha256"]
            assert [s["text"] for s in label["labels"]["sentences"]] == [s.text for s in segment(skill["text"])]
        follow = [ev.payload["labels"]["follow"] for ev in events
                  if ev.type == "LabelAssigned" and ev.payload["subject"] == "comparison"]  # fmt: skip
        assert all(f in (None, "full", "partial", "none") for f in follow)


def test_repeated_claims_keep_the_source_sentence_and_its_true_category(
    small_campaign: tuple[Path, CampaignSummary],
) -> None:
    labels: dict[str, dict[str, str]] = {}
    sources: dict[str, str] = {}
    inherited = []
    for events in _attempts(Path(small_campaign[0])).values():
        start = events[0].payload
        if start["source_attempt_id"]:
            sources[start["attempt_id"]] = start["source_attempt_id"]
        for ev in events:
            if ev.type == "LabelAssigned" and ev.payload["subject"] == "skill":
                sentences = ev.payload["labels"]["sentences"]
                labels[start["attempt_id"]] = {s["text"]: s["category"] for s in sentences}
                inherited += [(start["attempt_id"], s) for s in sentences if s["inherited"]]
    assert inherited  # unverified claims do propagate into the reader's own skill
    for attempt, sentence in inherited:
        assert labels[sources[attempt]][sentence["text"]] == sentence["category"]


def test_a_simulated_step_is_an_agent_step_field_for_field(small_campaign: tuple[Path, CampaignSummary]) -> None:
    """The simulator writes step payloads as dicts (they are most of its events): they keep AgentStep's fields
    in AgentStep's order."""
    from mkbsim.events import AgentStep

    for events in list(_attempts(small_campaign[0]).values())[:20]:
        for ev in events:
            if ev.type == "AgentStep":
                assert ev.payload == AgentStep(**ev.payload).to_dict()
                assert list(ev.payload) == list(AgentStep(**ev.payload).to_dict())
