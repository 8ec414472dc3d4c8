"""`mkbsim label` (heuristic and LLM labelers), labeler quality against ground truth, kappa, and the
skills report section."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from agents.agent_kit import Reply, StubLLM, serve
from scipy import stats
from skills_kit import cli

from mkbsim.campaigns import SimCampaign, run_campaign
from mkbsim.claims import CATEGORIES, classify
from mkbsim.events import EventStore
from mkbsim.simulator import CampaignConfig, get_profile, select_problems
from mkbsim.skills._agreement import cohen_kappa, precision_recall
from mkbsim.skills._report import spearman


def test_cohen_kappa_on_a_hand_computed_table() -> None:
    # 50 items: both yes 20, a yes/b no 5, a no/b yes 10, both no 15 → p_o 0.7, p_e 0.5·0.6 + 0.5·0.4 = 0.5
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert cohen_kappa(a, a) == pytest.approx(1.0)
    assert cohen_kappa(["x", "x"], ["x", "x"]) is None and cohen_kappa([], []) is None


def test_precision_recall_per_label() -> None:
    got = precision_recall(["a", "a", "b", "c"], ["a", "b", "b", "b"])
    assert got["a"] == {"precision": 1.0, "recall": 0.5, "support": 2, "predicted": 1}
    assert got["b"] == {"precision": pytest.approx(1 / 3), "recall": 1.0, "support": 1, "predicted": 3}
    assert got["c"] == {"precision": None, "recall": 0.0, "support": 1, "predicted": 0}


def test_spearman_matches_scipy_with_ties() -> None:
    rng = random.Random(4)
    x = [rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]) for _ in range(30)]
    y = [v + rng.gauss(0, 0.3) for v in x]
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic)
    assert spearman([1, 2], [2, 1]) is None and spearman([1, 1, 1], [1, 2, 3]) is None


def _labels(store: Path, labeler: str) -> list[dict[str, Any]]:
    with EventStore(store) as s:
        return [e.payload for e in s.read(types=["LabelAssigned"]) if e.payload["labeler"] == labeler]


def test_heuristic_labeling_end_to_end_with_quality_and_the_skills_report(
    capsys: pytest.CaptureFixture[str], store_copy: tuple[Path, str]
) -> None:
    store, campaign = store_copy
    argv = ("label", "--store", str(store), "--campaign", campaign, "--labeler", "heuristic")
    code, out, err = cli(capsys, *argv, "--format", "json")
    assert code == 0, err
    result = json.loads(out)
    assert result["labeled"]["skills"] > 200 and result["labeled"]["follow"] > 100 and result["labeled"]["failure"] > 5
    q = result["quality"]["heuristic"]
    assert q["categories"]["n"] > 800 and q["categories"]["accuracy"] >= 0.9
    assert set(q["categories"]["labels"]) == set(CATEGORIES)
    for v in q["categories"]["labels"].values():
        assert v["recall"] >= 0.8 and v["precision"] >= 0.6
    assert q["follow"]["n"] > 100 and q["follow"]["accuracy"] >= 0.8
    # a runtime-only harm the simulator gave no cause is labeled by the heuristic but not compared
    assert 5 < q["failure"]["n"] <= result["labeled"]["failure"] and q["failure"]["accuracy"] >= 0.5
    kappa = result["kappa"][0]
    assert (kappa["a"], kappa["b"]) == ("ground_truth", "heuristic") and kappa["categories"] > 0.8
    labels = _labels(store, "heuristic")
    assert {x["subject"] for x in labels} == {"skill", "comparison"}
    assert sum(x["labels"].get("failure_class") is not None for x in labels) == result["labeled"]["failure"]

    code, out, _ = cli(capsys, *argv)  # nothing left to label; the quality tables print
    assert code == 0 and out.startswith("heuristic: labeled 0 skills, 0 follow levels, 0 failure classes")
    assert "heuristic vs ground truth — categories" in out and "Cohen's kappa" in out
    assert len(_labels(store, "heuristic")) == len(labels)

    base = ("report", "--store", str(store), "--campaign", campaign, "--section", "skills", "--similarity", "lexical")
    code, out, err = cli(capsys, *base, "--labeler", "heuristic", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["labeler"] == "heuristic" and report["by"] == ["model"]
    pooled = [r for r in report["prevalence"] if r["model"] == "all"]
    assert [r["category"] for r in pooled] == list(CATEGORIES)
    assert pooled[0]["helped_n"] > 0 and pooled[0]["harmed_n"] > 0
    models = {r["model"] for r in report["prevalence"]} - {"all"}
    assert len(models) == 6 and len(report["prevalence"]) == 7 * len(CATEGORIES)
    for row in report["prevalence"]:
        if row["points"] is not None:
            assert row["points"] == pytest.approx(100 * (row["harmed"] - row["helped"]))
            lo, hi = row["points_ci"]
            assert lo <= hi and row["p_bh"] <= row["p_holm"]
    for row in report["follow"]:
        if row["n"]:
            assert sum(row[level] for level in ("full", "partial", "none")) == pytest.approx(1.0)
    assert {(r["model"], r["outcome"]) for r in report["follow"]} >= {("all", "helped"), ("all", "harmed")}
    for row in report["propagation"]:
        assert row["with_unverified"] >= row["helped_n"] + row["harmed_n"]
    for row in report["failures"]:
        assigned = [v["share"] for v in row["shares"].values() if v["share"] is not None]
        assert not row["assigned"] or sum(assigned) == pytest.approx(1.0)
        assert row["harmed"] == row["breaks"] + row["runtime_only"] == row["assigned"] + row["unassigned"]
    points = report["correlation"]["points"]
    expected = stats.spearmanr([p["full_share"] for p in points], [p["lift"] for p in points]).statistic
    # 6 models x 6 families; a cell with no labelled follow level (a weak model passing neither solo of a
    # family's two problems) has no point
    assert 30 <= report["correlation"]["cells"] <= 36
    assert len({(p["model"], p["family"]) for p in points}) == len(points)
    assert report["correlation"]["spearman_rho"] == pytest.approx(expected)
    lo, hi = report["correlation"]["spearman_rho_ci"]
    assert -1 <= lo <= hi <= 1
    code, out, _ = cli(capsys, *base)  # ground truth's labels by default
    assert code == 0 and "labels: ground_truth" in out and "Spearman rho" in out
    code, _, err = cli(capsys, *base, "--labeler", "llm:nobody")
    assert code == 2 and "no labels by 'llm:nobody'" in err
    code, _, err = cli(capsys, *base, "--format", "csv")
    assert code == 2 and "table or JSON only" in err


class RubricStub(StubLLM):
    """Answers each labeling question by its JSON schema: categories from mkbsim.claims (as the
    heuristic would), every follow level "full", every failure "faulty_execution"."""

    def next_action(self, body: dict[str, Any]) -> Reply:
        name = body["response_format"]["json_schema"]["name"]
        if name == "skill_categories":
            sentences = re.findall(r"^\d+\. (.*)$", body["messages"][1]["content"], re.MULTILINE)
            return Reply(json.dumps({"categories": [classify(s).category for s in sentences]}))
        if name == "follow_level":
            return Reply(json.dumps({"follow": "full"}))
        return Reply(json.dumps({"failure_class": "faulty_execution"}))


def small_campaign(store: Path) -> str:
    """One profile's campaign over three problems into ``store`` (its id): every kind of subject an LLM labeler
    labels, each labeling a few hundred model calls fewer than over the shared campaign of every profile."""
    config = CampaignConfig((get_profile("sim-glm-5.3-flash"),), tuple(select_problems("p01,p28,p45")), seed=2)
    with EventStore(store, create=True) as s:
        return run_campaign(s, SimCampaign(config)).campaign_id


def test_the_llm_labeler_records_its_exchanges_and_is_compared_with_the_other_labelers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUB_LABELER_KEY", "sk-stub-secret")
    store = tmp_path / "llm.sqlite"
    campaign = small_campaign(store)
    assert cli(capsys, "label", "--store", str(store), "--labeler", "heuristic")[0] == 0
    with serve(RubricStub()) as stub:
        argv = ("--campaign", campaign, "--labeler", "llm:openai/stub-model", "--api-base", stub.url,
                "--api-key-env", "STUB_LABELER_KEY")  # fmt: skip
        code, out, err = cli(capsys, "label", "--store", str(store), *argv, "--format", "json")
    assert code == 0, err
    result = json.loads(out)
    counts = result["labeled"]
    requests = [r.body for r in stub.received]
    assert len(requests) == counts["skills"] + counts["follow"] + counts["failure"] > 0
    assert all(r["response_format"]["type"] == "json_schema" for r in requests)
    labels = _labels(store, "llm:openai/stub-model")
    exchanges = [x for label in labels for x in label["labels"]["exchanges"]]
    assert len(exchanges) == len(requests)
    assert all(x["messages"][0]["role"] == "system" and json.loads(x["reply"]) for x in exchanges)
    kappa = {(k["a"], k["b"]): k for k in result["kappa"]}
    assert kappa[("heuristic", "llm:openai/stub-model")]["categories"] == pytest.approx(1.0)
    q = result["quality"]["llm:openai/stub-model"]
    assert q["follow"]["labels"]["full"]["recall"] == 1.0
    assert set(q["follow"]["labels"]) <= {"full", "partial", "none"}
    assert all(r.authorization == "Bearer sk-stub-secret" for r in stub.received)


def test_an_llm_labeler_whose_model_never_answers_stops_with_one_line(
    capsys: pytest.CaptureFixture[str], store_copy: tuple[Path, str]
) -> None:
    store, campaign = store_copy
    with serve(StubLLM()) as stub:  # an empty script: every request is answered 400
        argv = ("--campaign", campaign, "--labeler", "llm:openai/stub-model", "--api-base", stub.url)
        code, _, err = cli(capsys, "label", "--store", str(store), *argv)
    assert len(stub.received) == 1 and code == 2 and "labeler llm:openai/stub-model: the model call failed" in err
    assert _labels(store, "llm:openai/stub-model") == []


def test_an_llm_labeler_without_its_key_fails_at_once_with_one_line(
    capsys: pytest.CaptureFixture[str], store_copy: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, campaign = store_copy
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code, out, err = cli(capsys, "label", "--store", str(store), "--campaign", campaign,
                         "--labeler", "llm:openai/gpt-5-mini")  # fmt: skip
    assert code == 2 and out == ""
    assert err == "mkbsim label: error: labeler llm:openai/gpt-5-mini: OPENAI_API_KEY not set (export it, or name " \
                  "the variable with --api-key-env)\n"  # fmt: skip
    assert _labels(store, "llm:openai/gpt-5-mini") == []


def test_an_llm_labeler_sends_the_parameters_asked_for_and_no_temperature_by_default(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = tmp_path / "llm.sqlite"
    campaign = small_campaign(store)  # two labelings, each asking once a subject
    base = ("label", "--store", str(store), "--campaign", campaign, "--labeler", "llm:openai/stub-model")
    with serve(RubricStub()) as stub:
        assert cli(capsys, *base, "--api-base", stub.url, "--format", "json")[0] == 0
        assert stub.received and all("temperature" not in r.body for r in stub.received)
        stub.received.clear()
        args = ("--params", '{"top_p": 0.5, "temperature": 0}', "--param", "temperature=1", "--param", "seed=7")
        code, _, err = cli(capsys, *base, "--labeler", "llm:openai/stub-2",
                           "--api-base", stub.url, *args)  # fmt: skip
    assert code == 0, err
    assert stub.received and all((r.body["temperature"], r.body["top_p"], r.body["seed"]) == (1, 0.5, 7)
                                 for r in stub.received)  # fmt: skip
    for bad, message in ((("--param", "temperature"), "use KEY=VALUE"), (("--params", "[1]"), "one JSON object"),
                         (("--param", "model=x"), "'model' is set by mkbsim itself")):  # fmt: skip
        code, _, err = cli(capsys, *base, "--api-base", "http://127.0.0.1:9/v1", *bad)
        assert code == 2 and message in err, err
