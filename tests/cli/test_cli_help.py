"""Every command answers --help (DESIGN §9): its help text is formatted, not only parsed."""

from __future__ import annotations

import pytest

from mkbsim.cli import _main


@pytest.mark.parametrize("argv", [[], *([c] for c in _main.COMMAND_MODULES)], ids=lambda a: " ".join(a) or "mkbsim")
def test_every_command_prints_its_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        _main.main([*argv, "--help"])
    assert done.value.code == 0
    assert "usage: mkbsim" in capsys.readouterr().out
