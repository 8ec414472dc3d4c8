"""`mkbsim report --section skills` reads every table through the chosen labeler, per model (``--by``),
and reads every harmed comparison as having a target-side failure."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pytest
from skills.skills_kit import cli

from mkbsim.campaigns import CampaignSummary
from mkbsim.events import EventStore, RecordedEvent
from mkbsim.lab import Lab


def _report(capsys: pytest.CaptureFixture[str], store: Path, *extra: str) -> dict:  # type: ignore[type-arg]
    code, out, err = cli(capsys, "report", "--store", str(store), "--section", "skills", "--similarity", "lexical",
                         "--format", "json", *extra)  # fmt: skip
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def test_prevalence_comes_from_the_chosen_labeler_per_model(
    capsys: pytest.CaptureFixture[str], campaign: tuple[Path, CampaignSummary]
) -> None:
    store = campaign[0]
    report = _report(capsys, store)  # ground truth by default
    assert report["labeler"] == "ground_truth"
    with Lab(store) as lab:
        comparisons = lab.transfer.skill_comparisons(None)
        material = lab.skills.material(None)
        truth = lab.skills.labels([*material.skills, *material.treatments])["ground_truth"]
    held: dict[str, set[str]] = {}
    for (attempt, _), category in truth.sentences.items():
        held.setdefault(attempt, set()).add(category)
    rows = {(r["model"], r["category"]): r for r in report["prevalence"]}
    for model in {c.model for c in comparisons} | {"all"}:
        cell = [c for c in comparisons if model in ("all", c.model) and c.source_attempt_id in held]
        for outcome in ("helped", "harmed"):
            side = [c for c in cell if c.outcome == outcome]
            share = sum("unsupported_closure" in held[c.source_attempt_id or ""] for c in side) / len(side)
            row = rows[model, "unsupported_closure"]
            assert (row[outcome], row[f"{outcome}_n"]) == (pytest.approx(share, abs=1e-15), len(side))
    # the heuristic labeler (claim extractor, run in memory) reads the same skills differently
    heuristic = {(r["model"], r["category"]): r["helped"] for r in _report(capsys, store, "--labeler", "heuristic")[
        "prevalence"]}  # fmt: skip
    assert any(heuristic[k] != r["helped"] for k, r in rows.items())


def test_runtime_only_harms_get_causes_and_by_splits_or_refuses(
    capsys: pytest.CaptureFixture[str], campaign: tuple[Path, CampaignSummary]
) -> None:
    store = campaign[0]
    report = _report(capsys, store, "--by", "direction")
    assert report["by"] == ["direction"]
    failures = {r["direction"]: r for r in report["failures"]}
    assert set(failures) == {"all", "cutedsl2tirx", "tirx2cutedsl"}
    pooled = failures["all"]
    assert pooled["runtime_only"] > 0 and pooled["harmed"] == pooled["breaks"] + pooled["runtime_only"]
    # search truncation only explains runtime-only harms in the simulator: it reads 0 if they get no cause
    assert pooled["shares"]["search_truncation"]["count"] > 0
    skill_side = sum(pooled["shares"][c]["count"] for c in ("search_truncation", "unverified_adoption"))
    assert pooled["skill_side"] == pytest.approx(skill_side / pooled["assigned"])
    assert pooled["largest_of_comparisons"] == pytest.approx(
        pooled["shares"][pooled["largest"]]["count"] / pooled["comparisons"]
    )
    code, _, err = cli(capsys, "report", "--store", str(store), "--section", "skills", "--by", "campaign")
    assert code == 2 and "groups by model, direction or family" in err


def test_only_the_chosen_labelers_label_events_are_read(
    capsys: pytest.CaptureFixture[str], store_copy: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = store_copy[0]
    assert cli(capsys, "label", "--labeler", "heuristic", "--store", str(store))[0] == 0  # beside ground truth
    before = _report(capsys, store)
    with Lab(store) as lab:
        attempts = lab.skills.attempt_ids(None)
        assert lab.skills.labelers(attempts) == {"ground_truth", "heuristic"}
        both = lab.skills.labels(attempts)
        assert lab.skills.labels(attempts, ["heuristic"]) == {"heuristic": both["heuristic"]}
    read_at = EventStore.read_at
    labelers: set[str] = set()

    def counting(self: EventStore, positions: Iterable[int]) -> list[RecordedEvent]:
        events = read_at(self, positions)
        labelers.update(e.payload["labeler"] for e in events if e.type == "LabelAssigned")
        return events

    monkeypatch.setattr(EventStore, "read_at", counting)
    assert _report(capsys, store) == before
    assert labelers == {"ground_truth"}  # the default labeler's; the heuristic's labels stay unread
