"""The reference solutions pass the verifier's static scan (DESIGN §5) with no finding at all.

A docstring that merely names a PTX instruction the way CUDA source spells it (e.g. ``mma.sync.`` or
``cp.async.`` followed by a dot) reads as inline CUDA to the scan, and an `inline_cuda` submission is
left out of scored pass rates. Shared `_<helper>.py` modules beside the solutions are imported by them,
so they are scanned too (a DSL-neutral helper under both DSLs).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mkbsim.catalog import problems_root
from mkbsim.verifier._static import scan_source

FILES = sorted(problems_root().glob("*/solutions/*.py"))


def _dsls(path: Path) -> tuple[str, ...]:
    found = tuple(d for d in ("cutedsl", "tirx") if path.stem.endswith(d))
    return found or ("cutedsl", "tirx")


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_solution_source_has_no_static_finding(path: Path) -> None:
    for dsl in _dsls(path):
        report = scan_source(path.read_text(), dsl, path.name)
        assert report.syntax_error is None
        assert not report.findings, [f.text() for f in report.findings]


def test_the_scan_flags_an_instruction_spelled_like_cuda_source() -> None:
    report = scan_source('"""Tiles on mma.sync.m16n8k16."""\n', "tirx")
    assert report.of("inline_cuda")
