"""The report's further sections on a small simulated campaign with every control arm: controls beside
the treatment, the mixed models, robustness, and `mkbsim power` (JSON through the CLI)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from mkbsim.campaigns import SimCampaign, run_campaign
from mkbsim.cli import main
from mkbsim.events import EventStore
from mkbsim.simulator import CampaignConfig, select_problems, shipped_profiles

PROBLEMS = "p01,p04,p19,p23,p28,p33,p45,p49,p52,p58,p62,p72"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    profiles = tuple(shipped_profiles().values())[:2]
    config = CampaignConfig(profiles, tuple(select_problems(PROBLEMS)), seed=3)
    path = tmp_path_factory.mktemp("sections") / "events.sqlite"
    with EventStore(path, create=True) as s:
        run_campaign(s, SimCampaign(config, controls=("aa", "placebo", "matched")))
    return path


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:  # type: ignore[type-arg]
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def test_controls_sit_beside_the_treatment_on_the_same_slots(capsys: pytest.CaptureFixture[str], store: Path) -> None:
    report = _json(capsys, "report", "--store", str(store), "--format", "json")
    rows = report["controls"]
    assert {r["arm"] for r in rows} == {"aa", "placebo", "matched"}
    treated = {(g["model"], g["direction"]): g for g in report["groups"] if g["family"] == "all"}
    for r in rows:
        assert r["lift_difference"] == pytest.approx(r["treatment_paired_lift"] - r["paired_lift"], abs=1e-15)
        lo, hi = r["lift_difference_ci"]
        assert lo <= r["lift_difference"] <= hi or hi - lo < 1e-12
        if r["model"] != "all" and r["direction"] != "all" and r["n"] == r["treatment_n"]:  # every slot controlled
            assert r["treatment_paired_lift"] == pytest.approx(treated[r["model"], r["direction"]]["paired_lift"])
    assert report["aa_standing"]["standing"] and report["aa_standing"]["standing_gradient"]
    code = main(["report", "--store", str(store), "--section", "controls"])
    out = capsys.readouterr().out
    assert code == 0 and "A/A arm" in out and all(len(line) <= 80 for line in out.splitlines())


def test_model_robustness_and_power(capsys: pytest.CaptureFixture[str], store: Path) -> None:
    model = _json(capsys, "report", "--store", str(store), "--section", "model", "--format", "json")
    runtime = model["runtime"]
    assert runtime["n"] > 0 and len(runtime["cells"]) == 4
    assert {f["flip"] for f in model["flips"]} == {"rescue", "break"}
    robust = _json(capsys, "report", "--store", str(store), "--section", "robustness", "--format", "json")
    default = {(c["model"], c["direction"]): c for c in robust["cells"] if c["variant"] == "default"}
    report = _json(capsys, "report", "--store", str(store), "--format", "json", "--by", "model,direction")
    for g in report["groups"]:  # the default variant is the report's own lift, exactly
        if (g["model"], g["direction"]) in default:
            assert default[g["model"], g["direction"]]["paired_lift"] == pytest.approx(g["paired_lift"], abs=1e-15)
    first = robust["summary"][0]
    assert first["variant"] == "default" and first["cells_keeping_sign"] == first["cells"]
    power = _json(capsys, "power", "--sd", "0.43", "--simulations", "400", "--format", "json")
    (cell,) = power["cells"]
    # t-test power at 74 problems: the minimum detectable lift is about (1.99 + 0.85) · 0.43 / sqrt(74) in log r
    assert math.log1p(cell["minimum_detectable_lift"]) == pytest.approx(2.84 * 0.43 / math.sqrt(74), rel=0.1)
    code = main(["power", "--lift", "-2"])
    assert code == 2 and "--lift" in capsys.readouterr().err
