"""`mkbsim run` and `mkbsim calibrate` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mkbsim.cli import main
from mkbsim.events import EventStore
from mkbsim.simulator import parse_profile
from mkbsim.simulator._calibrate import TARGETS_DIR


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_run_records_a_campaign_then_reports_it_and_a_rerun_only_reports(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = tmp_path / "events.sqlite"
    argv = ("run", "--store", str(store), "--problems", "p28,p36,p72", "--profiles", "sim-gpt-5.6-sol,sim-glm-5.3")
    code, out, _ = run(capsys, *argv, "--seed", "5")
    assert code == 0
    assert "24 attempts" in out and "Transfer report" in out
    with EventStore(store) as s:
        assert s.check().ok and s.count("AttemptFinished") == 24
    code, out, _ = run(capsys, *argv, "--seed", "5")
    assert code == 0 and "already in" in out and "Transfer report" in out
    with EventStore(store) as s:
        assert s.count("AttemptFinished") == 24


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--profiles", "sim-nobody"), "unknown profile 'sim-nobody'"),
        (("--problems", "p99"), "unknown problem"),
        (("--replicates", "0"), "expected a positive integer"),
    ],
)
def test_run_reports_bad_options_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: tuple[str, ...], message: str
) -> None:
    code, _, err = run(capsys, "run", "--store", str(tmp_path / "e.sqlite"), *argv)
    assert code == 2 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_calibrate_evaluates_a_shipped_target_over_seeds(capsys: pytest.CaptureFixture[str]) -> None:
    target = TARGETS_DIR / "sim-gpt-5.6-sol.json"
    code, out, _ = run(capsys, "calibrate", "--target", str(target), "--problems", "p28,p36,p62,p72",
                       "--evaluations", "0", "--seeds", "3", "--workers", "2")  # fmt: skip
    assert code == 0
    assert "seeds 0..2" in out and "mean ± SD over 3 seeds" in out and "objective" in out
    row = next(line for line in out.splitlines() if "solo_pass_rate.cutedsl" in line)
    assert "assumed" in row and "±" in row  # the mean with its seed-to-seed spread; not the study's number
    assert "share of seeds" in out and "gains in both directions" in out
    assert "“GPT-5.6 Sol's 8.7% CuTe→TIRx lift comes from the 10 Quantization problems" in out


FITTED_TARGET = {"fit": ["quality"], "statements": []}


@pytest.fixture
def fitted(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Path:
    """A profile written by `mkbsim calibrate --write` (a quick fit of one parameter)."""
    target = json.loads((TARGETS_DIR / "sim-glm-5.3.json").read_text()) | FITTED_TARGET
    target_file = tmp_path / "target.json"
    target_file.write_text(json.dumps(target))
    out_file = tmp_path / "fitted.toml"
    code, out, _ = run(capsys, "calibrate", "--target", str(target_file), "--problems", "p28,p36",
                       "--evaluations", "4", "--seeds", "2", "--write", str(out_file))  # fmt: skip
    assert code == 0 and "fitted: quality" in out and "before" in out and "after" in out
    assert f"mkbsim run --profiles {out_file}" in out
    return out_file


def test_a_fitted_profile_runs_with_run_profiles(capsys: pytest.CaptureFixture[str], fitted: Path) -> None:
    profile = parse_profile(fitted.read_text(), str(fitted))
    assert profile.name == "sim-glm-5.3"
    store = fitted.with_name("e.sqlite")
    code, _, err = run(capsys, "run", "--store", str(store), "--problems", "p28", "--profiles",
                         f"{fitted},sim-gpt-5.6-sol")  # fmt: skip
    assert code == 0, err
    with EventStore(store) as s:
        config = next(iter(s.read(types=["CampaignStarted"]))).payload["config"]
    assert config["profiles"]["sim-glm-5.3"]["quality"] == pytest.approx(profile.quality)
    assert set(config["profiles"]) == {"sim-glm-5.3", "sim-gpt-5.6-sol"}


def test_a_fitted_profile_runs_from_a_campaign_file_beside_it(capsys: pytest.CaptureFixture[str], fitted: Path
                                                               ) -> None:  # fmt: skip
    campaign = fitted.with_name("campaign.toml")
    campaign.write_text('[campaign]\nkind = "simulated"\nproblems = ["p28"]\n\n[agents]\nprofiles = ["fitted.toml"]\n')
    code, _, err = run(capsys, "run", "--store", str(fitted.with_name("c.sqlite")), "--campaign", str(campaign))
    assert code == 0, err


@pytest.mark.parametrize(
    ("profiles", "message"),
    [
        ("missing.toml", "missing.toml: no such profile file"),
        ("{fitted},sim-glm-5.3", "are both named 'sim-glm-5.3'"),
    ],
)
def test_run_refuses_a_missing_profile_file_or_two_profiles_of_one_name(
    capsys: pytest.CaptureFixture[str], fitted: Path, profiles: str, message: str
) -> None:
    code, _, err = run(capsys, "run", "--store", str(fitted.with_name("e.sqlite")), "--problems", "p28",
                       "--profiles", profiles.format(fitted=fitted))  # fmt: skip
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"statistics": {"lift": {"value": 1, "tolerance": 1, "assumed": "x"}}}, "unknown statistic 'lift'"),
        ({"statistics": {"paired_lift.cutedsl2tirx": {"value": 1, "tolerance": 1}}}, "give exactly one of `stated`"),
        ({"statements": [{"text": "t", "assumed": "x", "holds": [["paired_lift.cutedsl2tirx", "=", 0]]}]},
         "a condition is [statistic"),
    ],
)
def test_calibrate_refuses_a_malformed_target(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, change: dict[str, object], message: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"profile": "sim-glm-5.3", "statistics": {}} | change))
    code, _, err = run(capsys, "calibrate", "--target", str(bad))
    assert code == 2 and message in err


def test_a_campaign_whose_every_attempt_failed_on_infrastructure_exits_1_with_the_reasons(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: object) -> None:
        raise RuntimeError("design data unreadable")

    monkeypatch.setattr("mkbsim.simulator._attempt._Attempt.run", broken)  # the pool's forked workers see it too
    argv = ("run", "--store", str(tmp_path / "e.sqlite"), "--problems", "p28,p36", "--profiles", "sim-gpt-5.6-sol",
            "--workers", "2")  # fmt: skip
    code, _, err = run(capsys, *argv)
    assert code == 1 and "Traceback" not in err
    assert "every attempt ended in infra_error, nothing was measured" in err
    assert "4 × internal error: RuntimeError: design data unreadable" in err  # the four solos; no treatment started
    monkeypatch.undo()
    code, out, _ = run(capsys, *argv)  # the fault fixed, the same command resumes: the four solos run again
    assert code == 0 and "attempts 8 finished" in out
