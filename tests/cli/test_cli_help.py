"""Every command answers --help (DESIGN §9): its help text is formatted, not only parsed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mkbsim.cli import _main


@pytest.mark.parametrize("argv", [[], *([c] for c in _main.COMMAND_MODULES)], ids=lambda a: " ".join(a) or "mkbsim")
def test_every_command_prints_its_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        _main.main([*argv, "--help"])
    assert done.value.code == 0
    assert "usage: mkbsim" in capsys.readouterr().out


def test_a_command_run_registers_only_its_own_command() -> None:
    # every command module is compiled and run to register it; `mkbsim report` needs only its own
    probe = ("import sys, mkbsim.cli._main as m; m.build_parser('report'); "
             "print(sorted(k for k in sys.modules if k.startswith('mkbsim.cli._')))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['mkbsim.cli._common', 'mkbsim.cli._main', 'mkbsim.cli._report']"
    with pytest.raises(SystemExit) as done:  # a misspelt command is still told every command
        _main.main(["repor"])
    assert done.value.code == 2
