"""The report's sections, computed from resolved comparisons and solo attempts. Pure: the caller reads
the records through the read model (``mkbsim.lab``) and renders the result.

Sections: ``groups`` (paired lift, help/harm, verdict changes, intervals and tests per cell, with
``family`` = "all" in the pooled rows), ``solo`` (scored pass rate and passing-only geometric-mean
speedup per DSL), ``standing`` (help/harm when the source stands above/same/below the target solo),
``standing_gradient`` (above vs below, with permutation nulls), ``sensitivity`` (each model × direction
lift without its best family) and ``asymmetry`` (how the reverse direction fared for helped comparisons).

Uncertainty (DESIGN §6, ``mkbsim.metrics._clusters``): every rate, share and difference has a ``*_ci``
from the cluster bootstrap over problems (replicates, models and directions of a problem drawn
together); the paired lift of a cell with fewer than SMALL_CELL_PROBLEMS problems has the cluster t
interval instead (``paired_lift_ci_method``). Each table's p-values carry ``*_holm`` and ``*_bh``.
The bootstraps use common random numbers (seed 0: cells of one size share their resamples); the
permutation tests a seed per cell.
"""

from __future__ import annotations

import collections
import itertools
import math
import operator
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from mkbsim.metrics._clusters import (
    SMALL_CELL_PROBLEMS,
    ClusterBootstrap,
    add_adjusted,
    cluster_t_interval,
    lift_of_sums,
    ratio_of_sums,
    sign_flip_p,
)
from mkbsim.metrics._nulls import PairTables, StandingCounts, asymmetry_p, standing_gap_p
from mkbsim.metrics._rules import DIRECTIONS, OUTCOMES, STANDINGS, reverse_direction
from mkbsim.metrics._stats import (
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
    "n", "problems", "paired_lift", "paired_lift_ci", "paired_lift_ci_method", "help_rate", "help_rate_ci",
    "harm_rate", "harm_rate_ci", "helped", "harmed", "neutral", "skipped", "helped_verdict_change",
    "helped_runtime_only", "harmed_verdict_change", "harmed_runtime_only", "p", "wilcoxon_p", "sign_p",
    "p_holm", "p_bh",
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
    family. Dimensions not grouped read "all". ``p`` is adjusted across every row of the table."""
    dims = group_dimensions(by)
    cells = _cells(records, dims, grouped=by, pooled=("family",))
    rows = [dict(zip(dims, key, strict=True)) | cell_stats(cell, seed=_cell_seed(key, seed)) for key, cell in cells]
    add_adjusted(rows)
    return rows


def cell_stats(cell: Sequence[ComparisonRecord], *, seed: int = 0) -> Row:
    """One cell's row: the metrics, their intervals (problems resampled together), and the tests:
    ``p`` the sign-flip permutation over problems; ``wilcoxon_p`` and ``sign_p`` on the problems' mean
    log r (one value per problem, so a problem seen by several models, directions or replicates counts once)."""
    logs = [math.log(c.r) for c in cell]
    problems = [c.problem for c in cell]
    boot = ClusterBootstrap(problems, resamples=BOOTSTRAP_RESAMPLES)
    helped, harmed = _counts(cell)
    rescues = sum(1 for c in cell if c.verdict_change == "rescue")  # a rescue is always helped (r = 4)
    breaks = sum(1 for c in cell if c.verdict_change == "break")  # a break is always harmed (r = 1/4)
    lift_ci, method = lift_interval(logs, problems, boot)
    per_problem = problem_means(logs, problems)
    ones = [1.0] * len(cell)
    return {
        "n": len(cell),
        "problems": boot.k,
        "paired_lift": lift_of_logs(logs),
        "paired_lift_ci": lift_ci,
        "paired_lift_ci_method": method,
        "help_rate": helped / len(cell),
        "help_rate_ci": boot.interval(ratio_of_sums, [c.outcome == "helped" for c in cell], ones),
        "harm_rate": harmed / len(cell),
        "harm_rate_ci": boot.interval(ratio_of_sums, [c.outcome == "harmed" for c in cell], ones),
        "helped": helped,
        "harmed": harmed,
        "neutral": len(cell) - helped - harmed,
        "skipped": sum(1 for c in cell if c.skipped),
        "helped_verdict_change": rescues,
        "helped_runtime_only": helped - rescues,
        "harmed_verdict_change": breaks,
        "harmed_runtime_only": harmed - breaks,
        "p": sign_flip_p(logs, problems, seed=seed),
        "wilcoxon_p": wilcoxon_signed_rank_p(per_problem),
        "sign_p": sign_test_p(per_problem),
    }


def lift_interval(
    logs: Sequence[float], problems: Sequence[str], boot: ClusterBootstrap
) -> tuple[list[float], str]:
    """The paired lift's interval and how it was made: the cluster t interval below SMALL_CELL_PROBLEMS
    problems (2 or more), else the cluster bootstrap (with one problem: the degenerate resampling)."""
    if 2 <= boot.k < SMALL_CELL_PROBLEMS:
        interval = cluster_t_interval(logs, problems)
        assert interval is not None
        return interval, "t"
    interval = boot.interval(lift_of_sums, logs, [1.0] * len(logs))
    assert interval is not None  # the lift is defined in every resample
    return interval, "bootstrap"


def problem_means(values: Sequence[float], problems: Sequence[str]) -> list[float]:
    """Each problem's mean of ``values``, in order of first appearance."""
    sums: dict[str, list[float]] = {}
    for v, p in zip(values, problems, strict=True):
        sums.setdefault(p, []).append(v)
    return [math.fsum(vs) / len(vs) for vs in sums.values()]


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


def _lift_ci(cell: Sequence[ComparisonRecord]) -> list[float]:
    problems = [c.problem for c in cell]
    return lift_interval([math.log(c.r) for c in cell], problems, ClusterBootstrap(problems))[0]


def solo(records: Sequence[SoloRecord], by: Sequence[str]) -> list[Row]:
    """Scored pass rate and passing-only geometric-mean speedup per DSL, by the report's dimensions
    (direction becomes the DSL), with DSL- and family-pooled rows; intervals resample problems."""
    dims = ("campaign",) * ("campaign" in by) + ("model", "dsl", "family")
    grouped = [d for d in dims if d == "dsl" or d in by]
    rows = []
    for key, cell in _cells(records, dims, grouped=grouped, pooled=("dsl", "family")):
        speedups = [s.speedup for s in cell if s.passed and s.speedup]
        passed = sum(1 for s in cell if s.passed)
        boot = ClusterBootstrap([s.problem for s in cell], resamples=BOOTSTRAP_RESAMPLES)
        counted = [1.0 if s.passed and s.speedup else 0.0 for s in cell]
        rows.append(
            dict(zip(dims, key, strict=True))
            | {
                "n": len(cell),
                "passed": passed,
                "pass_rate": passed / len(cell),
                "pass_rate_ci": boot.interval(ratio_of_sums, [float(s.passed) for s in cell], [1.0] * len(cell)),
                "inline_cuda_excluded": sum(1 for s in cell if s.inline_cuda_excluded),
                "speedup_geomean": geometric_mean(speedups) if speedups else None,
                "speedup_geomean_ci": boot.interval(
                    _exp_ratio, [math.log(s.speedup or 1.0) if c else 0.0 for s, c in zip(cell, counted, strict=True)],
                    counted,
                ) if speedups else None,
            }
        )  # fmt: skip
    return rows


def _exp_ratio(log_sum: np.ndarray, count: np.ndarray) -> np.ndarray:
    return np.exp(log_sum / count)


def standing(records: Sequence[ComparisonRecord]) -> list[Row]:
    """Help and harm shares by the source's standing, pooled over models and directions and per model,
    with intervals over problems."""
    rows = []
    for model, cell in _per_model(records):
        for tier in STANDINGS:
            sub = [c for c in cell if c.standing == tier]
            if not sub:
                continue
            helped, harmed = _counts(sub)
            boot = ClusterBootstrap([c.problem for c in sub])
            ones = [1.0] * len(sub)
            rows.append({
                "model": model, "standing": tier, "n": len(sub), "helped": helped, "harmed": harmed,
                "help_rate": helped / len(sub),
                "help_rate_ci": boot.interval(ratio_of_sums, [c.outcome == "helped" for c in sub], ones),
                "harm_rate": harmed / len(sub),
                "harm_rate_ci": boot.interval(ratio_of_sums, [c.outcome == "harmed" for c in sub], ones),
                "paired_lift": _lift(sub),
                "paired_lift_ci": lift_interval([math.log(c.r) for c in sub], [c.problem for c in sub], boot)[0],
            })  # fmt: skip
    return rows


def standing_gradient(records: Sequence[ComparisonRecord]) -> list[Row]:
    """Per model and pooled: help share above − below and harm share below − above, each with an
    interval over problems and a permutation p (standing labels shuffled within problems), Holm/BH
    adjusted across the table (``help_gap_p_holm`` …)."""
    rows = []
    for model, cell in _per_model(records):
        stood = [c for c in cell if c.standing is not None]
        above = _flags(c.standing == "above" for c in stood)
        below = _flags(c.standing == "below" for c in stood)
        if not above.any() or not below.any():
            continue
        problems = [c.problem for c in stood]
        boot = ClusterBootstrap(problems)
        row: Row = {"model": model, "n": len(stood), "above": int(above.sum()), "below": int(below.sum())}
        for name, outcome, sign in (("help_gap", "helped", 1.0), ("harm_gap", "harmed", -1.0)):
            marked = _flags(c.outcome == outcome for c in stood)
            at_above, at_below = marked & above, marked & below
            gap = sign * (at_above.sum() / above.sum() - at_below.sum() / below.sum())
            counts = StandingCounts(*(boot.sums(v).astype(np.int64)
                                      for v in (np.ones(len(stood)), marked, above, below, at_above, at_below)))
            row |= {
                name: float(gap),
                f"{name}_ci": boot.interval(lambda ma, a, mb, b, s=sign: s * (ma / a - mb / b),
                                            at_above, above, at_below, below),
                f"{name}_p": standing_gap_p(counts, seed=_cell_seed((model, name), 0)),
            }  # fmt: skip
        rows.append(row)
    for key in ("help_gap_p", "harm_gap_p"):
        add_adjusted(rows, key)
    return rows


def _flags(values: Iterable[bool]) -> np.ndarray:
    return np.fromiter(values, dtype=bool)


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
            "paired_lift_ci": _lift_ci(cell),
            "families_positive": sum(1 for v in lifts.values() if v > 0),
            "families_negative": sum(1 for v in lifts.values() if v < 0),
            "best_family": best, "best_family_n": len(families[best]), "best_family_lift": lifts[best],
            "n_without_best": len(rest), "lift_without_best": without,
            "lift_without_best_ci": _lift_ci(rest) if rest else None,
            "sign_change": None if without is None else lift * without < 0,
        })  # fmt: skip
    return rows


def asymmetry(records: Sequence[ComparisonRecord]) -> list[Row]:
    """For helped comparisons, how the reverse direction (same campaign, model, problem, replicate) fared:
    shares with intervals over problems, and ``gap`` (reverse harmed − reverse helped share) with a
    permutation p (reverse outcomes shuffled within the model), Holm/BH adjusted across the table."""
    index = {(c.campaign, c.model, c.problem, c.replicate, c.direction): c for c in records}
    rows = []
    for model, cell in _per_model(records):
        helped = [c for c in cell if c.outcome == "helped"]
        pairs = [
            (c, r)
            for c in helped
            if (r := index.get((c.campaign, c.model, c.problem, c.replicate, reverse_direction(c.direction))))
        ]
        harmed = sum(1 for _, r in pairs if r.outcome == "harmed")
        helped_back = sum(1 for _, r in pairs if r.outcome == "helped")
        row: Row = {
            "model": model, "helped": len(helped), "reverse_resolved": len(pairs),
            "reverse_harmed": harmed, "reverse_helped": helped_back,
            "reverse_neutral": len(pairs) - harmed - helped_back,
            "reverse_harmed_share": harmed / len(pairs) if pairs else None,
            "reverse_helped_share": helped_back / len(pairs) if pairs else None,
            "gap": (harmed - helped_back) / len(pairs) if pairs else None,
        }  # fmt: skip
        if pairs:
            boot = ClusterBootstrap([c.problem for c, _ in pairs])
            hurt = [r.outcome == "harmed" for _, r in pairs]
            back = [r.outcome == "helped" for _, r in pairs]
            ones = [1.0] * len(pairs)
            row |= {
                "reverse_harmed_share_ci": boot.interval(ratio_of_sums, hurt, ones),
                "reverse_helped_share_ci": boot.interval(ratio_of_sums, back, ones),
                "gap_ci": boot.interval(lambda a, b, n: (a - b) / n, hurt, back, ones),
            }
        else:
            row |= {"reverse_harmed_share_ci": None, "reverse_helped_share_ci": None, "gap_ci": None}
        row["p"] = asymmetry_p(_pair_tables(cell, index), seed=_cell_seed((model, "asymmetry"), 0)) if pairs else None
        rows.append(row)
    add_adjusted(rows)
    return rows


def _pair_tables(cell: Sequence[ComparisonRecord], index: dict[tuple[Any, ...], ComparisonRecord]) -> PairTables:
    """Per model, the 3 × 3 outcome table of pairs (the first direction's outcome by the second's)."""
    first, second = sorted(DIRECTIONS)
    # counted in a dict, then placed: indexing a numpy table once per pair cost 30× as much
    counts = collections.Counter(
        (c.model, c.outcome, r.outcome) for c in cell
        if c.direction == first and (r := index.get((c.campaign, c.model, c.problem, c.replicate, second)))
    )  # fmt: skip
    tables: dict[str, np.ndarray] = {}
    for (model, outcome, reverse), count in counts.items():
        table = tables.setdefault(model, np.zeros((3, 3), dtype=np.int64))
        table[OUTCOMES.index(outcome), OUTCOMES.index(reverse)] = count
    t = np.stack(list(tables.values())) if tables else np.zeros((0, 3, 3), dtype=np.int64)
    h, m = OUTCOMES.index("helped"), OUTCOMES.index("harmed")
    return PairTables(
        pairs=t.sum(axis=(1, 2)), rows_helped=t[:, h].sum(axis=1), rows_harmed=t[:, m].sum(axis=1),
        cols_helped=t[:, :, h].sum(axis=1), cols_harmed=t[:, :, m].sum(axis=1),
        helped_helped=t[:, h, h], helped_harmed=t[:, h, m], harmed_helped=t[:, m, h],
    )  # fmt: skip


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
    targets: dict[tuple[str, ...], list[list[Rec]]] = {}  # a record's values → the cells it joins, made once
    for rec in records:
        key = values(rec)
        lists = targets.get(key)
        if lists is None:
            options = [
                ((v, ALL) if pool else (v,)) if group else (ALL,)
                for v, (group, pool) in zip(key, choices, strict=True)
            ]
            lists = targets[key] = [cells.setdefault(k, []) for k in itertools.product(*options)]
        for cell in lists:
            cell.append(rec)
    return sorted(cells.items(), key=lambda kv: tuple((v != ALL, v) for v in kv[0]))


def _by(records: Iterable[ComparisonRecord], *fields: str) -> list[tuple[tuple[str, ...], list[ComparisonRecord]]]:
    values = operator.attrgetter(*fields)
    out: dict[Any, list[ComparisonRecord]] = {}
    for rec in records:
        out.setdefault(values(rec), []).append(rec)
    return sorted((key if len(fields) > 1 else (key,), cell) for key, cell in out.items())


def _per_model(records: Sequence[ComparisonRecord]) -> list[tuple[str, list[ComparisonRecord]]]:
    """The pooled cell ("all") first, then one per model."""
    return [(ALL, list(records)), *((model, cell) for (model,), cell in _by(records, "model"))]


def _cell_seed(key: Sequence[str], seed: int) -> int:
    """A seed per cell, so a cell's p does not depend on which other cells the report holds."""
    return zlib.crc32("\x1f".join(key).encode()) ^ seed


def report(
    campaigns: Sequence[str],
    comparisons: Sequence[ComparisonRecord],
    solos: Sequence[SoloRecord],
    *,
    pending: int,
    by: Sequence[str] = DEFAULT_BY,
    controls: Mapping[str, Sequence[ComparisonRecord]] | None = None,
) -> Row:
    """Every section, as the JSON report (DESIGN §9) carries them; ``controls``: control arm → records."""
    from mkbsim.metrics._controls import aa_standing, control_rows

    return {
        "groups": groups(comparisons, by),
        "solo": solo(solos, by),
        "standing": standing(comparisons),
        "standing_gradient": standing_gradient(comparisons),
        "sensitivity": sensitivity(comparisons),
        "asymmetry": asymmetry(comparisons),
        "controls": control_rows(comparisons, controls or {}),
        "aa_standing": aa_standing(controls or {}),
        "by": list(by),
        "campaigns": list(campaigns),
        "comparisons": {"resolved": len(comparisons), "pending": pending},
    }
