"""The report's sections, computed from resolved comparisons and solo attempts. Pure: the caller reads
the records through the read model (``mkbsim.lab``) and renders the result.

Sections: ``groups`` (paired lift, help/harm, verdict changes, bootstrap CI and tests per cell, with
``family`` = "all" in the pooled rows), ``solo`` (scored pass rate and passing-only geometric-mean
speedup per DSL), ``standing`` (help/harm when the source stands above/same/below the target solo),
``sensitivity`` (each model × direction lift without its best family) and ``asymmetry`` (how the
reverse direction fared for helped comparisons).
"""

from __future__ import annotations

import itertools
import math
import operator
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from mkbsim.metrics._rules import STANDINGS, reverse_direction
from mkbsim.metrics._stats import (
    bootstrap_lift_ci,
    geometric_mean,
    lift_of_logs,
    sign_test_p,
    wilcoxon_signed_rank_p,
)

ALL = "all"
#: Dimensions a report can group by, in display order.
DIMENSIONS = ("campaign", "model", "direction", "family")
DEFAULT_BY = ("model", "direction", "family")
#: Every groups row has these keys after its dimension keys.
GROUP_STATS = (
    "n", "problems", "paired_lift", "paired_lift_ci", "help_rate", "harm_rate", "helped", "harmed", "neutral",
    "skipped", "helped_verdict_change", "helped_runtime_only", "harmed_verdict_change", "harmed_runtime_only",
    "wilcoxon_p", "sign_p",
)  # fmt: skip
BOOTSTRAP_RESAMPLES = 2000

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ComparisonRecord:
    """One resolved comparison, as the report needs it."""

    campaign: str
    model: str
    problem: str
    family: str
    direction: str
    replicate: int
    r: float
    outcome: str
    verdict_change: str
    skipped: bool
    standing: str | None


@dataclass(frozen=True, slots=True)
class SoloRecord:
    """One resolved solo attempt. ``passed`` is the scored verdict; ``inline_cuda_excluded`` marks a
    verifier pass that used inline CUDA (not a scored pass)."""

    campaign: str
    model: str
    problem: str
    family: str
    dsl: str
    passed: bool
    inline_cuda_excluded: bool
    speedup: float | None


def group_dimensions(by: Sequence[str]) -> tuple[str, ...]:
    """The keys every groups row carries: the grouped dimensions plus model, direction and family."""
    return tuple(d for d in DIMENSIONS if d in by or d != "campaign")


def groups(records: Sequence[ComparisonRecord], by: Sequence[str], *, seed: int = 0) -> list[Row]:
    """One row per cell of ``by`` (a subset of DIMENSIONS), plus family-pooled rows when grouping by
    family. Dimensions not grouped read "all"."""
    dims = group_dimensions(by)
    cells = _cells(records, dims, grouped=by, pooled=("family",))
    return [dict(zip(dims, key, strict=True)) | cell_stats(cell, seed=_cell_seed(key, seed)) for key, cell in cells]


def cell_stats(cell: Sequence[ComparisonRecord], *, seed: int = 0) -> Row:
    """One cell's row. The interval resamples problems; the two tests take comparisons as independent."""
    ratios = [c.r for c in cell]
    logs = [math.log(r) for r in ratios]
    lo, hi = bootstrap_lift_ci(ratios, [c.problem for c in cell], resamples=BOOTSTRAP_RESAMPLES, seed=seed)
    helped, harmed = _counts(cell)
    rescues = sum(1 for c in cell if c.verdict_change == "rescue")  # a rescue is always helped (r = 4)
    breaks = sum(1 for c in cell if c.verdict_change == "break")  # a break is always harmed (r = 1/4)
    return {
        "n": len(cell),
        "problems": len({c.problem for c in cell}),
        "paired_lift": lift_of_logs(logs),
        "paired_lift_ci": [lo, hi],
        "help_rate": helped / len(cell),
        "harm_rate": harmed / len(cell),
        "helped": helped,
        "harmed": harmed,
        "neutral": len(cell) - helped - harmed,
        "skipped": sum(1 for c in cell if c.skipped),
        "helped_verdict_change": rescues,
        "helped_runtime_only": helped - rescues,
        "harmed_verdict_change": breaks,
        "harmed_runtime_only": harmed - breaks,
        "wilcoxon_p": wilcoxon_signed_rank_p(logs),
        "sign_p": sign_test_p(logs),
    }


def _counts(cell: Iterable[ComparisonRecord]) -> tuple[int, int]:
    """(helped, harmed), from the outcome each comparison was classified with by ``rules.outcome``."""
    helped = harmed = 0
    for c in cell:
        if c.outcome == "helped":
            helped += 1
        elif c.outcome == "harmed":
            harmed += 1
    return helped, harmed


def _lift(cell: Iterable[ComparisonRecord]) -> float:
    return lift_of_logs([math.log(c.r) for c in cell])


def solo(records: Sequence[SoloRecord], by: Sequence[str]) -> list[Row]:
    """Scored pass rate and passing-only geometric-mean speedup per DSL, by the report's dimensions
    (direction becomes the DSL), with DSL- and family-pooled rows."""
    dims = ("campaign",) * ("campaign" in by) + ("model", "dsl", "family")
    grouped = [d for d in dims if d == "dsl" or d in by]
    rows = []
    for key, cell in _cells(records, dims, grouped=grouped, pooled=("dsl", "family")):
        speedups = [s.speedup for s in cell if s.passed and s.speedup]
        passed = sum(1 for s in cell if s.passed)
        rows.append(
            dict(zip(dims, key, strict=True))
            | {
                "n": len(cell),
                "passed": passed,
                "pass_rate": passed / len(cell),
                "inline_cuda_excluded": sum(1 for s in cell if s.inline_cuda_excluded),
                "speedup_geomean": geometric_mean(speedups) if speedups else None,
            }
        )
    return rows


def standing(records: Sequence[ComparisonRecord]) -> list[Row]:
    """Help and harm shares by the source's standing, pooled over models and directions and per model."""
    rows = []
    for model, cell in _per_model(records):
        for tier in STANDINGS:
            sub = [c for c in cell if c.standing == tier]
            if not sub:
                continue
            helped, harmed = _counts(sub)
            rows.append({
                "model": model, "standing": tier, "n": len(sub), "helped": helped, "harmed": harmed,
                "help_rate": helped / len(sub), "harm_rate": harmed / len(sub), "paired_lift": _lift(sub),
            })  # fmt: skip
    return rows


def sensitivity(records: Sequence[ComparisonRecord]) -> list[Row]:
    """Each model × direction cell's lift, its best family, and its lift with that family removed."""
    rows = []
    for (model, direction), cell in _by(records, "model", "direction"):
        families = {family: sub for (family,), sub in _by(cell, "family")}
        lifts = {f: _lift(sub) for f, sub in families.items()}
        best = max(lifts, key=lambda f: lifts[f])  # the first of equals, families being sorted
        rest = [c for c in cell if c.family != best]
        lift = _lift(cell)
        without = _lift(rest) if rest else None
        rows.append({
            "model": model, "direction": direction, "n": len(cell), "paired_lift": lift,
            "families_positive": sum(1 for v in lifts.values() if v > 0),
            "families_negative": sum(1 for v in lifts.values() if v < 0),
            "best_family": best, "best_family_n": len(families[best]), "best_family_lift": lifts[best],
            "n_without_best": len(rest), "lift_without_best": without,
            "sign_change": None if without is None else lift * without < 0,
        })  # fmt: skip
    return rows


def asymmetry(records: Sequence[ComparisonRecord]) -> list[Row]:
    """For helped comparisons, how the reverse direction (same campaign, model, problem, replicate) fared."""
    index = {(c.campaign, c.model, c.problem, c.replicate, c.direction): c for c in records}
    rows = []
    for model, cell in _per_model(records):
        helped = [c for c in cell if c.outcome == "helped"]
        reverse = [
            r
            for c in helped
            if (r := index.get((c.campaign, c.model, c.problem, c.replicate, reverse_direction(c.direction))))
        ]
        harmed = sum(1 for r in reverse if r.outcome == "harmed")
        helped_back = sum(1 for r in reverse if r.outcome == "helped")
        rows.append({
            "model": model, "helped": len(helped), "reverse_resolved": len(reverse),
            "reverse_harmed": harmed, "reverse_helped": helped_back,
            "reverse_neutral": len(reverse) - harmed - helped_back,
            "reverse_harmed_share": harmed / len(reverse) if reverse else None,
            "reverse_helped_share": helped_back / len(reverse) if reverse else None,
        })  # fmt: skip
    return rows


# -- grouping helpers ----------------------------------------------------------------------------

Rec = TypeVar("Rec", ComparisonRecord, SoloRecord)


def _cells(
    records: Iterable[Rec], dims: Sequence[str], *, grouped: Sequence[str], pooled: Sequence[str]
) -> list[tuple[tuple[str, ...], list[Rec]]]:
    """Records per cell, sorted with "all" first. A grouped dimension in ``pooled`` also gets an "all"
    cell; a dimension not grouped is "all" everywhere."""
    values = operator.attrgetter(*dims)  # callers pass two dimensions or more, so this returns a tuple
    choices = [(d in grouped, d in pooled) for d in dims]
    cells: dict[tuple[str, ...], list[Rec]] = {}
    for rec in records:
        options = [
            ((v, ALL) if pool else (v,)) if group else (ALL,)
            for v, (group, pool) in zip(values(rec), choices, strict=True)
        ]
        for key in itertools.product(*options):
            cells.setdefault(key, []).append(rec)
    return sorted(cells.items(), key=lambda kv: tuple((v != ALL, v) for v in kv[0]))


def _by(records: Iterable[ComparisonRecord], *fields: str) -> list[tuple[tuple[str, ...], list[ComparisonRecord]]]:
    out: dict[tuple[str, ...], list[ComparisonRecord]] = {}
    for rec in records:
        out.setdefault(tuple(getattr(rec, f) for f in fields), []).append(rec)
    return sorted(out.items())


def _per_model(records: Sequence[ComparisonRecord]) -> list[tuple[str, list[ComparisonRecord]]]:
    """The pooled cell ("all") first, then one per model."""
    return [(ALL, list(records)), *((model, cell) for (model,), cell in _by(records, "model"))]


def _cell_seed(key: Sequence[str], seed: int) -> int:
    """A seed per cell, so a cell's interval does not depend on which other cells the report holds."""
    return zlib.crc32("\x1f".join(key).encode()) ^ seed


def report(
    campaigns: Sequence[str],
    comparisons: Sequence[ComparisonRecord],
    solos: Sequence[SoloRecord],
    *,
    pending: int,
    by: Sequence[str] = DEFAULT_BY,
) -> Row:
    """Every section, as the JSON report (DESIGN §9) carries them."""
    return {
        "groups": groups(comparisons, by),
        "solo": solo(solos, by),
        "standing": standing(comparisons),
        "sensitivity": sensitivity(comparisons),
        "asymmetry": asymmetry(comparisons),
        "by": list(by),
        "campaigns": list(campaigns),
        "comparisons": {"resolved": len(comparisons), "pending": pending},
    }
