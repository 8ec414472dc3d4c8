"""`mkbsim verify`: pass exit 0, fail exit 1, bad input exit 2 with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mkbsim.cli import _main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "submissions"


@pytest.fixture
def cli() -> object:
    assert "verify" in _main.COMMAND_MODULES
    return _main.main


@pytest.mark.ordinary  # (the verify command end to end: kept in the ordinary run, tests/conftest.py)
def test_pass_and_fail(cli, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    assert cli(["verify", str(EXAMPLES / "p36_rmsnorm_tirx.py"), "--problem", "p36", "--dsl", "tirx", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["passed"] and payload["backend"] == "cpu" and payload["workload"] == "smoke"
    assert payload["submission"] == "final" and payload["protocol"] == "paper"

    wrong = EXAMPLES / "p36_rmsnorm_tirx_wrong.py"
    assert cli(["verify", str(wrong), "--problem", "rmsnorm_h128_qwen3_30b_bf16", "--dsl", "tirx"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("FAIL  wrong_output") and "exceeds the allowance" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.py", "--problem", "p36", "--dsl", "tirx"], "no such file"),
        (["{ex}", "--problem", "p99", "--dsl", "tirx"], "unknown problem"),
        (["{ex}", "--problem", "p36", "--dsl", "triton"], "unknown DSL"),
        (["{ex}", "--problem", "p36", "--dsl", "tirx", "--protocol", "fast"], "unknown protocol"),
        (["{ex}", "--problem", "p36", "--dsl", "tirx", "--backend", "tpu"], "unknown backend"),
        (["{ex}", "--problem", "p36", "--dsl", "cutedsl", "--backend", "cpu"], "cuda backend"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli, capsys, args: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    argv = ["verify", *(a.replace("{ex}", str(EXAMPLES / "p36_rmsnorm_tirx.py")) for a in args)]
    assert cli(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_submission_s_text_in_the_verdict_reaches_the_terminal_escaped(  # type: ignore[no-untyped-def]
    cli, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Red team rt38 F1: run() raised with cursor moves, erasures and concealment in its message, which the feedback
    quotes: on a terminal the FAIL headline was erased and a forged PASS line shown. Every control is printed as an
    escape, and the headline stays the first line."""
    forged = "\x1b[1A\x1b[2K\x1b[1GPASS  speedup 26x\x1b[8m \u009b2K \u202eSSAP \ud800"  # (a lone surrogate: rt38 F2)
    path = tmp_path / "forged_feedback.py"
    path.write_text(f"def run(x, w):\n    raise RuntimeError({forged!r})\n")
    assert cli(["verify", str(path), "--problem", "p36", "--dsl", "tirx"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("FAIL  ") and "\\u001b[2K" in out and "\\u009b" in out and "\\u202e" in out
    assert "\\ud800" in out
    assert not any(c in out for c in "\x1b\x9b\u202e")
