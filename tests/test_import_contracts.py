"""The package layering of DESIGN §2, checked by `lint-imports` (import-linter) with the contracts in
pyproject.toml: on this tree it passes; a planted import of tui in mkbsim, or of an extra's package in the
verifier, breaks it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PACKAGES = ("mkbsim", "tui", "skill_filters", "problems")


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` with this interpreter, in ``cwd`` (its pyproject.toml, its packages)."""
    command = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run([sys.executable, "-c", command, "--no-cache"], cwd=cwd, capture_output=True, text=True,
                          timeout=300)  # fmt: skip


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the packages, the contracts and their contract type, to plant imports in."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "tests" / "kits").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "kits" / "import_contracts.py", tmp_path / "tests" / "kits")
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


def test_the_layering_holds() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


def test_the_planted_tree_holds_before_planting(tree: Path) -> None:
    assert lint_imports(tree).returncode == 0


def test_mkbsim_importing_tui_breaks_it(tree: Path) -> None:
    (tree / "mkbsim" / "cli" / "_planted.py").write_text("def run() -> None:\n    import tui.app  # noqa\n")
    result = lint_imports(tree)
    assert result.returncode == 1
    assert "tui and skill_filters depend on mkbsim, never the reverse" in result.stdout and "BROKEN" in result.stdout
    assert "mkbsim.cli._planted -> tui.app" in result.stdout


def test_the_verifier_importing_an_extra_breaks_it(tree: Path) -> None:
    (tree / "mkbsim" / "verifier" / "_planted.py").write_text("import rich  # noqa\n")
    result = lint_imports(tree)
    assert result.returncode == 1 and "mkbsim.verifier imports rich" in result.stdout
