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
        assert (c["sign_p"] is None) == (c["changed"] == 0)
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
                         "drop_unsupported_closure", "--model", "sim-glm-5.3-flash")  # fmt: skip
    assert code == 0 and "already in" in err
    assert "sim-glm-5.3-flash" in out and "sim-gpt-5.6-sol" not in out and "paired tests" in out
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
