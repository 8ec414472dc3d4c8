"""The reference solutions pass the verifier's static scan (DESIGN §5) with no finding at all.

A string that names a PTX instruction the way CUDA source spells it (e.g. ``mma.sync.`` or ``cp.async.``
followed by a dot) reads as inline CUDA to the scan, and an `inline_cuda` submission is left out of scored
pass rates; a docstring is prose and is not read so (since 2026-12-05: a call that takes inline assembly is
flagged by its name, whatever string it is given). Shared `_<helper>.py` modules beside the solutions are imported
by them, so they are scanned too (a DSL-neutral helper under both DSLs), except the modules that
`python -m problems._bundle` inlines into solutions: a submission never imports those (their own
`from problems import ...` would be refused), and their code is scanned inside every bundled solution.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mkbsim.catalog import problems_root
from mkbsim.verifier._static import scan_source
from problems import _bundle

SOLUTION_FILES = sorted(problems_root().glob("*/solutions/*.py"))
BUNDLED = {(_bundle.ROOT / m).resolve() for p in SOLUTION_FILES for m, _ in _bundle.header(p.read_text())}
FILES = [p for p in SOLUTION_FILES if p.resolve() not in BUNDLED]


def _dsls(path: Path) -> tuple[str, ...]:
    found = tuple(d for d in ("cutedsl", "tirx") if path.stem.endswith(d))
    return found or ("cutedsl", "tirx")


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_solution_source_has_no_static_finding(path: Path) -> None:
    for dsl in _dsls(path):
        report = scan_source(path.read_text(), dsl, path.name)
        assert report.syntax_error is None
        assert not report.findings, [f.text() for f in report.findings]


def test_the_scan_flags_an_instruction_spelled_like_cuda_source_outside_docstrings() -> None:
    assert not scan_source('"""Tiles on mma.sync.m16n8k16."""\n', "tirx").of("inline_cuda")
    assert scan_source('ASM = "mma.sync.aligned.m16n8k16"\n', "tirx").of("inline_cuda")


def test_bundle_sources_are_left_to_the_solutions_that_inline_them() -> None:
    names = {p.name for p in SOLUTION_FILES if p.resolve() in BUNDLED}
    assert {"_moe_cutedsl.py", "_moe_tirx.py"} <= names
    assert all(p.name not in names for p in FILES)
