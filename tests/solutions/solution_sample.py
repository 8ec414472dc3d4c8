"""Which solution files the per-file compile checks build in an ordinary run, and which only on request.

Building one solution's kernels for sm_90a (TVM lowering, CuTe DSL's MLIR pipeline, nvcc, ptxas, a fresh
guarded interpreter) costs seconds to minutes on the CPU, and the same check runs over ~100 files. An
ordinary run (CI) builds one file of each family × plan kind × DSL, the first by problem number, so every
kind of kernel and every code path of the check is exercised; ``MKBSIM_ALL_SOLUTIONS=1`` builds every file
(README "Tests": run it before each GPU session). The files left out are reported as skipped, with that
variable as the reason, never silently dropped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

ALL_SOLUTIONS = "MKBSIM_ALL_SOLUTIONS"
SOLUTION_RE = re.compile(r"^(\d{2,3})_([a-z0-9_]+)_(cutedsl|tirx)\.py$")


def kind(path: Path) -> tuple[str, str, str]:
    """(family, plan kind, DSL) of a solution file: problems/<family>/solutions/<nn>_<plan>_<dsl>.py."""
    match = SOLUTION_RE.match(path.name)
    if match is None:
        raise ValueError(f"{path.name} is not named <nn>_<plan>_<dsl>.py")
    return path.parent.parent.name, match.group(2), match.group(3)


def representatives(paths: Iterable[Path]) -> set[Path]:
    """The first file (by problem number) of each family × plan kind × DSL among ``paths``."""
    first: dict[tuple[str, str, str], Path] = {}
    for path in sorted(paths, key=lambda p: (int(p.name.split("_")[0]), p.name)):
        first.setdefault(kind(path), path)
    return set(first.values())


def sampled(paths: list[Path], marks: Callable[[Path], list[pytest.MarkDecorator]] = lambda _: []) -> list[object]:
    """``paths`` as parameters (with ``marks(path)`` on each), those outside the representatives skipped
    unless MKBSIM_ALL_SOLUTIONS=1. Every file keeps its own group, so the checks of one file that share a
    build (`solution_builds`) run in one pytest-xdist worker."""
    everything = os.environ.get(ALL_SOLUTIONS) == "1"
    chosen = representatives(paths)
    skip = pytest.mark.skip(reason=f"a representative of its family × plan × DSL is built instead: {ALL_SOLUTIONS}=1")

    def param(path: Path) -> object:
        left_out = [] if everything or path in chosen else [skip]
        return pytest.param(path, marks=[*marks(path), pytest.mark.xdist_group(path.stem), *left_out], id=path.stem)

    return [param(p) for p in paths]


def on_request(*values: object, id: str, everyday: bool) -> object:
    """One parameter set of a check whose every set costs a compile: run in an ordinary run when ``everyday``
    (chosen so that each plan and each tiling is still built once), else only with MKBSIM_ALL_SOLUTIONS=1."""
    marks = (
        []
        if everyday or os.environ.get(ALL_SOLUTIONS) == "1"
        else [pytest.mark.skip(reason=f"another plan x tiling builds this check in an ordinary run: {ALL_SOLUTIONS}=1")]
    )
    return pytest.param(*values, marks=marks, id=id)
