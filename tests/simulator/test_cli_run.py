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


def test_calibrate_evaluates_a_shipped_target(capsys: pytest.CaptureFixture[str]) -> None:
    target = TARGETS_DIR / "sim-gpt-5.6-sol.json"
    code, out, _ = run(capsys, "calibrate", "--target", str(target), "--problems", "p28,p36,p62,p72",
                       "--evaluations", "0")  # fmt: skip
    assert code == 0
    assert "paired_lift.cutedsl2tirx" in out and "solo_pass_rate.cutedsl" in out and "objective" in out


def test_calibrate_fits_and_writes_a_loadable_profile(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = json.loads((TARGETS_DIR / "sim-glm-5.3.json").read_text())
    target["fit"] = ["quality"]
    target_file = tmp_path / "target.json"
    target_file.write_text(json.dumps(target))
    out_file = tmp_path / "fitted.toml"
    code, out, _ = run(capsys, "calibrate", "--target", str(target_file), "--problems", "p28,p36",
                       "--evaluations", "4", "--write", str(out_file))  # fmt: skip
    assert code == 0 and "fitted: quality" in out and "before" in out and "after" in out
    fitted = parse_profile(out_file.read_text(), str(out_file))
    assert fitted.name == "sim-glm-5.3"


def test_calibrate_refuses_a_malformed_target(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"profile": "sim-glm-5.3", "statistics": {"lift": {"value": 1, "tolerance": 1}}}))
    code, _, err = run(capsys, "calibrate", "--target", str(bad))
    assert code == 2 and "unknown statistics lift" in err


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
