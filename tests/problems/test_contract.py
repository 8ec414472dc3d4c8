"""Every problem module honours the contract of problems/FORMAT.md (DESIGN §8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mkbsim.catalog import FAMILIES, check_problem, load_problem, problems_root

PATHS = sorted(p for f in FAMILIES for p in (problems_root() / f).glob("[0-9][0-9]_*.py"))


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem[:48])
def test_problem_meets_contract(path: Path) -> None:
    result = check_problem(load_problem(path))
    assert result.ok, "\n".join(result.failures)
