"""`mkbsim filter-test` end to end on a small seeded simulated campaign.

The simulator's prediction (tests/simulator/test_filter_effect.py explains it): dropping unsupported
closures raises paired lift where skills held them — most for the profile that writes and believes
closures (GLM-5.3-Flash-like), not at all for the one that re-checks claims (GPT-5.6-Sol-like) — and
leaves every comparison whose source skill held no closure exactly as it was.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from skills_kit import cli

from mkbsim.events import EventStore
from mkbsim.skills._filter_test import filter_test_report


def _run(capsys: pytest.CaptureFixture[str], store: Path, campaign: str, *extra: str) -> dict:
    code, out, err = cli(capsys, "filter-test", "--store", str(store), "--campaign", campaign, *extra,
                         "--format", "json")  # fmt: skip
    assert code == 0, err
    return json.loads(out)


def test_dropping_unsupported_closures_raises_lift_as_the_simulator_predicts(
    capsys: pytest.CaptureFixture[str], store_copy: tuple[Path, str]
) -> None:
    store, base = store_copy
    result = _run(capsys, store, base, "--filter", "drop_unsupported_closure")
    cells = {(c["model"], c["direction"]): c for c in result["cells"]}
    pooled = cells[("all", "all")]
    assert pooled["n"] == 6 * 12 * 2 and pooled["changed"] > 0
    assert pooled["lift_change"] > 0
    assert cells[("sim-glm-5.3-flash", "all")]["lift_change"] >= 0.05
    assert cells[("sim-gpt-5.6-sol", "all")]["changed"] == 0
    assert {k for k in cells if k[1] != "all"} == {(m, d) for m, _ in cells if m != "all"
                                                   for d in ("cutedsl2tirx", "tirx2cutedsl")}  # fmt: skip
    for c in cells.values():
        assert c["lift_change"] == pytest.approx(c["lift_filtered"] - c["lift_unfiltered"])
        assert (c["p"] is None) == (c["changed"] == 0)
        assert c["p_holm"] is None or c["p"] <= c["p_bh"] <= c["p_holm"]
        assert c["lift_change_ci"][0] <= c["lift_change"] <= c["lift_change_ci"][1]
        assert c["lift_filtered_ci"][0] <= c["lift_filtered"] <= c["lift_filtered_ci"][1]
    assert pooled["problems"] == 12 and pooled["lift_change_ci"][0] > -0.05
    with EventStore(store) as s:
        started = [
            e.payload for e in s.read(types=["CampaignStarted"]) if e.payload["campaign_id"] == result["campaign_id"]
        ]
        assert started[0]["config"]["base_campaign_id"] == base
        assert started[0]["config"]["filter"] == "drop_unsupported_closure"
        reruns = [
            e.payload for e in s.read(types=["AttemptStarted"]) if e.payload["campaign_id"] == result["campaign_id"]
        ]
        reads = [e.payload for e in s.read(types=["SkillRead"]) if e.payload["filter"] == "drop_unsupported_closure"]
    assert len(reruns) == 144 and all(
        r["filter"] == "drop_unsupported_closure" and r["baseline_attempt_id"] for r in reruns
    )
    assert reads and not any("is not worth pursuing" in r["text"] for r in reads)

    # a second run reports the stored rerun; --model narrows the report
    code, out, err = cli(capsys, "filter-test", "--store", str(store), "--campaign", base, "--filter",
                         "drop_unsupported_closure", "--model", "sim-glm-5.3-flash", "--plots",
                         str(store.parent / "figures"))  # fmt: skip
    assert code == 0 and "already in" in err
    assert "sim-glm-5.3-flash" in out and "sim-gpt-5.6-sol" not in out and "sign flips of problems" in out
    png = store.parent / "figures" / "filter_test_drop_unsupported_closure.png"
    assert png.read_bytes().startswith(b"\x89PNG")
    code, _, err = cli(capsys, "filter-test", "--store", str(store), "--campaign", base, "--filter", "identity",
                       "--model", "no-such-model")  # fmt: skip
    assert code == 2 and "no model no-such-model" in err


def test_the_identity_filter_changes_no_comparison(
    capsys: pytest.CaptureFixture[str], store_copy: tuple[Path, str]
) -> None:
    store, base = store_copy
    result = _run(capsys, store, base, "--filter", "identity")
    assert all(c["changed"] == 0 and c["lift_change"] == 0 for c in result["cells"])
    assert result["cells"][-1]["n"] == 144


def test_filter_test_refuses_missing_arguments_and_unknown_campaigns(
    capsys: pytest.CaptureFixture[str], store_copy: tuple[Path, str]
) -> None:
    store, _ = store_copy
    code, _, err = cli(capsys, "filter-test", "--store", str(store), "--filter", "identity")
    assert code == 2 and "--campaign and --filter are required" in err
    code, _, err = cli(capsys, "filter-test", "--store", str(store), "--campaign", "sim-nope", "--filter", "identity")
    assert code == 2 and "no campaign 'sim-nope'" in err


def test_the_six_models_of_one_problem_are_one_cluster() -> None:
    """Every model's comparison of three problems improves: 18 comparisons, but three problems, so the
    sign-flip test over problems can reach no lower than 2/2³ (a test over comparisons would give 2/2¹⁸)."""
    models = [f"m{i}" for i in range(6)]
    before = {(m, p, "cutedsl2tirx", 0): 1.0 for m in models for p in ("p01", "p02", "p03")}
    after = {k: 1.5 for k in before}
    rows = filter_test_report(before, after)
    pooled = rows[-1]
    assert (pooled["model"], pooled["n"], pooled["problems"], pooled["changed"]) == ("all", 18, 3, 18)
    assert pooled["p"] == 0.25 and pooled["sign_p"] == 0.25 and pooled["wilcoxon_p"] == 0.25
    assert pooled["lift_change"] == pytest.approx(0.5) and pooled["lift_change_ci"] == pytest.approx([0.5, 0.5])
    assert pooled["help_change"] == 1.0 and pooled["p_holm"] == 1.0  # 13 cells, the smallest p is 0.25
    assert [r["p_holm"] for r in rows] == [1.0] * len(rows)
