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

import itertools
import math
import operator
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mkbsim.metrics._clusters import (
    SMALL_CELL_PROBLEMS,
    ClusterBootstrap,
    Clusters,
    add_adjusted,
    cluster_t_interval,
    clusters_of,
    lift_of_sums,
    ratio_of_sums,
    sign_flip_p,
)
from mkbsim.metrics._nulls import PairTables, StandingCounts, asymmetry_p, standing_gap_p
from mkbsim.metrics._rules import DIRECTIONS, OUTCOMES, STANDINGS, reverse_direction
from mkbsim.metrics._stats import (
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


# not frozen: a frozen dataclass sets each field through object.__setattr__ (10x the cost of creating
# one); reads make one per row, tens of thousands per report. Nothing changes them after.
@dataclass(slots=True)
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


# not frozen: a frozen dataclass sets each field through object.__setattr__ (10x the cost of creating
# one); reads make one per row, tens of thousands per report. Nothing changes them after.
@dataclass(slots=True)
class SoloRecord:
    """One resolved solo attempt. ``passed`` is the scored verdict; ``inline_cuda_excluded`` marks a
    verifier pass that used inline CUDA (not a scored pass); ``partial_plan`` a scored pass whose eager code made
    the problem's products (a partial plan: verifier README, "Plan kinds"), which the study's protocol scores."""

    campaign: str
    model: str
    problem: str
    family: str
    dsl: str
    passed: bool
    inline_cuda_excluded: bool
    speedup: float | None
    partial_plan: bool = False


def group_dimensions(by: Sequence[str]) -> tuple[str, ...]:
    """The keys every groups row carries: the grouped dimensions plus model, direction and family."""
    return tuple(d for d in DIMENSIONS if d in by or d != "campaign")


def groups(records: Comparisons, by: Sequence[str], *, seed: int = 0) -> list[Row]:
    """One row per cell of ``by`` (a subset of DIMENSIONS), plus family-pooled rows when grouping by
    family. Dimensions not grouped read "all". ``p`` is adjusted across every row of the table."""
    dims = group_dimensions(by)
    columns = ComparisonColumns.of(records)
    fields = {"campaign": columns.campaign, "model": columns.model, "direction": columns.direction,
              "family": columns.family}  # fmt: skip
    cells = _cells(fields, columns.size, dims, grouped=by, pooled=("family",))
    rows = [dict(zip(dims, key, strict=True)) | _cell_stats(columns, at, seed=_cell_seed(key, seed))
            for key, at in cells]  # fmt: skip
    add_adjusted(rows)
    return rows


def cell_stats(cell: Sequence[ComparisonRecord], *, seed: int = 0) -> Row:
    """One cell's row: the metrics, their intervals (problems resampled together), and the tests:
    ``p`` the sign-flip permutation over problems; ``wilcoxon_p`` and ``sign_p`` on the problems' mean
    log r (one value per problem, so a problem seen by several models, directions or replicates counts once)."""
    return _cell_stats(ComparisonColumns(cell), np.arange(len(cell)), seed=seed)


def _cell_stats(columns: ComparisonColumns, at: np.ndarray, *, seed: int) -> Row:
    """``cell_stats`` of the comparisons at positions ``at``."""
    logs = columns.log_r[at]
    problems = columns.problems.clusters(at)
    boot = ClusterBootstrap(problems, resamples=BOOTSTRAP_RESAMPLES)
    helped_flags, harmed_flags = columns.helped[at], columns.harmed[at]
    helped, harmed = int(np.count_nonzero(helped_flags)), int(np.count_nonzero(harmed_flags))
    rescues = int(np.count_nonzero(columns.rescue[at]))  # a rescue is always helped (r = 4)
    breaks = int(np.count_nonzero(columns.broke[at]))  # a break is always harmed (r = 1/4)
    lift_ci, method = lift_interval(logs, problems, boot)
    per_problem = problem_means(logs, problems)
    n = int(at.size)
    ones = np.ones(n)
    return {
        "n": n,
        "problems": boot.k,
        "paired_lift": lift_of_logs(logs.tolist()),
        "paired_lift_ci": lift_ci,
        "paired_lift_ci_method": method,
        "help_rate": helped / n,
        "help_rate_ci": boot.interval(ratio_of_sums, helped_flags, ones),
        "harm_rate": harmed / n,
        "harm_rate_ci": boot.interval(ratio_of_sums, harmed_flags, ones),
        "helped": helped,
        "harmed": harmed,
        "neutral": n - helped - harmed,
        "skipped": int(np.count_nonzero(columns.skipped[at])),
        "helped_verdict_change": rescues,
        "helped_runtime_only": helped - rescues,
        "harmed_verdict_change": breaks,
        "harmed_runtime_only": harmed - breaks,
        "p": sign_flip_p(logs, problems, seed=seed),
        "wilcoxon_p": wilcoxon_signed_rank_p(per_problem),
        "sign_p": sign_test_p(per_problem),
    }


def lift_interval(
    logs: Sequence[float] | np.ndarray, problems: Sequence[str] | Clusters, boot: ClusterBootstrap
) -> tuple[list[float], str]:
    """The paired lift's interval and how it was made: the cluster t interval below SMALL_CELL_PROBLEMS
    problems (2 or more), else the cluster bootstrap (with one problem: the degenerate resampling)."""
    if 2 <= boot.k < SMALL_CELL_PROBLEMS:
        interval = cluster_t_interval(logs, problems)
        assert interval is not None
        return interval, "t"
    interval = boot.interval(lift_of_sums, logs, np.ones(len(logs)))
    assert interval is not None  # the lift is defined in every resample
    return interval, "bootstrap"


def problem_means(values: Sequence[float] | np.ndarray, problems: Sequence[str] | Clusters) -> list[float]:
    """Each problem's mean of ``values`` (an exact sum, ``math.fsum``), in order of first appearance."""
    numbered = clusters_of(problems)
    x = np.asarray(values, dtype=np.float64)
    order = np.argsort(numbered.index, kind="stable")  # a problem's values together, each in their order
    sizes = np.bincount(numbered.index, minlength=numbered.k)
    ends = np.cumsum(sizes)
    grouped, bounds = x[order].tolist(), zip((ends - sizes).tolist(), ends.tolist(), strict=True)
    means = [math.fsum(grouped[start:end]) / (end - start) for start, end in bounds]
    first = order[ends - sizes]  # a stable sort puts each problem's first appearance first
    return [means[i] for i in np.argsort(first)]


def _lift(columns: ComparisonColumns, at: np.ndarray) -> float:
    return lift_of_logs(columns.log_r[at].tolist())


def _lift_ci(columns: ComparisonColumns, at: np.ndarray) -> list[float]:
    problems = columns.problems.clusters(at)
    return lift_interval(columns.log_r[at], problems, ClusterBootstrap(problems))[0]


def solo(records: Sequence[SoloRecord], by: Sequence[str]) -> list[Row]:
    """Scored pass rate and passing-only geometric-mean speedup per DSL, by the report's dimensions
    (direction becomes the DSL), with DSL- and family-pooled rows; intervals resample problems."""
    dims = ("campaign",) * ("campaign" in by) + ("model", "dsl", "family")
    grouped = [d for d in dims if d == "dsl" or d in by]
    n = len(records)
    passed_all = np.fromiter(map(operator.attrgetter("passed"), records), dtype=bool, count=n)
    inline_all = np.fromiter(map(operator.attrgetter("inline_cuda_excluded"), records), dtype=bool, count=n)
    partial_all = np.fromiter(map(operator.attrgetter("partial_plan"), records), dtype=bool, count=n)
    # a speedup counts where the attempt passed with one (its log; 0 elsewhere, weighted out)
    speedup_of = list(map(operator.attrgetter("speedup"), records))
    counted_all = passed_all & np.fromiter(map(bool, speedup_of), dtype=bool, count=n)
    log_speedup = np.zeros(n)
    log_speedup[counted_all] = list(map(math.log, itertools.compress(speedup_of, counted_all.tolist())))
    problems = _Codes([s.problem for s in records], key=repr)
    fields = {d: _Codes(list(map(operator.attrgetter(d), records))) for d in grouped}
    rows = []
    for key, at in _cells(fields, n, dims, grouped=grouped, pooled=("dsl", "family")):
        passed_flags, counted = passed_all[at], counted_all[at]
        passed, speedups = int(np.count_nonzero(passed_flags)), int(np.count_nonzero(counted))
        boot = ClusterBootstrap(problems.clusters(at), resamples=BOOTSTRAP_RESAMPLES)
        logs = log_speedup[at]
        rows.append(
            dict(zip(dims, key, strict=True))
            | {
                "n": int(at.size),
                "passed": passed,
                "pass_rate": passed / at.size,
                "pass_rate_ci": boot.interval(ratio_of_sums, passed_flags, np.ones(at.size)),
                "inline_cuda_excluded": int(np.count_nonzero(inline_all[at])),
                "partial_plans": int(np.count_nonzero(partial_all[at])),  # of the scored passes
                "speedup_geomean": math.exp(math.fsum(logs[counted].tolist()) / speedups) if speedups else None,
                "speedup_geomean_ci": boot.interval(_exp_ratio, logs, counted) if speedups else None,
            }
        )  # fmt: skip
    return rows


def _exp_ratio(log_sum: np.ndarray, count: np.ndarray) -> np.ndarray:
    return np.exp(log_sum / count)


def standing(records: Comparisons) -> list[Row]:
    """Help and harm shares by the source's standing, pooled over models and directions and per model,
    with intervals over problems."""
    columns = ComparisonColumns.of(records)
    rows = []
    for model, cell in _per_model(columns):
        for tier, name in enumerate(STANDINGS):
            at = cell[columns.standing[cell] == tier]
            if not at.size:
                continue
            n = int(at.size)
            helped, harmed = columns.helped[at], columns.harmed[at]
            problems = columns.problems.clusters(at)
            boot = ClusterBootstrap(problems)
            ones = np.ones(n)
            rows.append({
                "model": model, "standing": name, "n": n, "helped": int(np.count_nonzero(helped)),
                "harmed": int(np.count_nonzero(harmed)),
                "help_rate": int(np.count_nonzero(helped)) / n,
                "help_rate_ci": boot.interval(ratio_of_sums, helped, ones),
                "harm_rate": int(np.count_nonzero(harmed)) / n,
                "harm_rate_ci": boot.interval(ratio_of_sums, harmed, ones),
                "paired_lift": _lift(columns, at),
                "paired_lift_ci": lift_interval(columns.log_r[at], problems, boot)[0],
            })  # fmt: skip
    return rows


def standing_gradient(records: Comparisons) -> list[Row]:
    """Per model and pooled: help share above − below and harm share below − above, each with an
    interval over problems and a permutation p (standing labels shuffled within problems), Holm/BH
    adjusted across the table (``help_gap_p_holm`` …)."""
    columns = ComparisonColumns.of(records)
    rows = []
    for model, cell in _per_model(columns):
        stood = cell[columns.standing[cell] >= 0]
        above = columns.standing[stood] == STANDINGS.index("above")
        below = columns.standing[stood] == STANDINGS.index("below")
        if not above.any() or not below.any():
            continue
        boot = ClusterBootstrap(columns.problems.clusters(stood))
        row: Row = {"model": model, "n": int(stood.size), "above": int(above.sum()), "below": int(below.sum())}
        for name, flags, sign in (("help_gap", columns.helped, 1.0), ("harm_gap", columns.harmed, -1.0)):
            marked = flags[stood]
            at_above, at_below = marked & above, marked & below
            gap = sign * (at_above.sum() / above.sum() - at_below.sum() / below.sum())
            counts = StandingCounts(
                *(
                    boot.sums(v).astype(np.int64)
                    for v in (np.ones(stood.size), marked, above, below, at_above, at_below)
                )
            )
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


def sensitivity(records: Comparisons) -> list[Row]:
    """Each model × direction cell's lift, its best family, and its lift with that family removed."""
    columns = ComparisonColumns.of(records)
    rows = []
    for (model, direction), cell in columns.split(np.arange(columns.size), "model", "direction"):
        families = {family: at for (family,), at in columns.split(cell, "family")}
        lifts = {f: _lift(columns, at) for f, at in families.items()}
        best = max(lifts, key=lambda f: lifts[f])  # the first of equals, families being sorted
        rest = cell[columns.family.codes[cell] != columns.family.labels.index(best)]
        lift = _lift(columns, cell)
        without = _lift(columns, rest) if rest.size else None
        rows.append({
            "model": model, "direction": direction, "n": int(cell.size), "paired_lift": lift,
            "paired_lift_ci": _lift_ci(columns, cell),
            "families_positive": sum(1 for v in lifts.values() if v > 0),
            "families_negative": sum(1 for v in lifts.values() if v < 0),
            "best_family": best, "best_family_n": int(families[best].size), "best_family_lift": lifts[best],
            "n_without_best": int(rest.size), "lift_without_best": without,
            "lift_without_best_ci": _lift_ci(columns, rest) if rest.size else None,
            "sign_change": None if without is None else lift * without < 0,
        })  # fmt: skip
    return rows


def asymmetry(records: Comparisons) -> list[Row]:
    """For helped comparisons, how the reverse direction (same campaign, model, problem, replicate) fared:
    shares with intervals over problems, and ``gap`` (reverse harmed − reverse helped share) with a
    permutation p (reverse outcomes shuffled within the model), Holm/BH adjusted across the table."""
    columns = ComparisonColumns.of(records)
    reverse = columns.reverse()
    rows = []
    for model, cell in _per_model(columns):
        helped = cell[columns.helped[cell]]
        back_of = reverse[helped]
        sources, reverses = helped[back_of >= 0], back_of[back_of >= 0]
        pairs = int(sources.size)
        hurt, back = columns.harmed[reverses], columns.helped[reverses]
        harmed, helped_back = int(np.count_nonzero(hurt)), int(np.count_nonzero(back))
        row: Row = {
            "model": model, "helped": int(helped.size), "reverse_resolved": pairs,
            "reverse_harmed": harmed, "reverse_helped": helped_back,
            "reverse_neutral": pairs - harmed - helped_back,
            "reverse_harmed_share": harmed / pairs if pairs else None,
            "reverse_helped_share": helped_back / pairs if pairs else None,
            "gap": (harmed - helped_back) / pairs if pairs else None,
        }  # fmt: skip
        if pairs:
            boot = ClusterBootstrap(columns.problems.clusters(sources))
            ones = np.ones(pairs)
            row |= {
                "reverse_harmed_share_ci": boot.interval(ratio_of_sums, hurt, ones),
                "reverse_helped_share_ci": boot.interval(ratio_of_sums, back, ones),
                "gap_ci": boot.interval(lambda a, b, n: (a - b) / n, hurt, back, ones),
            }
        else:
            row |= {"reverse_harmed_share_ci": None, "reverse_helped_share_ci": None, "gap_ci": None}
        tables = _pair_tables(columns, cell, reverse)
        row["p"] = asymmetry_p(tables, seed=_cell_seed((model, "asymmetry"), 0)) if pairs else None
        rows.append(row)
    add_adjusted(rows)
    return rows


def _pair_tables(columns: ComparisonColumns, cell: np.ndarray, reverse: np.ndarray) -> PairTables:
    """Per model, in order of the cell's first pair of it, the 3 × 3 outcome table of pairs (the first
    direction's outcome by the second's)."""
    directions, first = columns.direction.labels, sorted(DIRECTIONS)[0]
    first_code = directions.index(first) if first in directions else -1  # -1: the cell has none of it
    at = cell[(columns.direction.codes[cell] == first_code) & (reverse[cell] >= 0)]
    models = columns.model.codes[at]
    cells = columns.outcome[at] * len(OUTCOMES) + columns.outcome[reverse[at]]
    present, seen = np.unique(models, return_index=True)
    tables = [np.bincount(cells[models == model], minlength=9).reshape(3, 3) for model in present[np.argsort(seen)]]
    t = np.stack(tables) if tables else np.zeros((0, 3, 3), dtype=np.int64)
    h, m = OUTCOMES.index("helped"), OUTCOMES.index("harmed")
    return PairTables(
        pairs=t.sum(axis=(1, 2)), rows_helped=t[:, h].sum(axis=1), rows_harmed=t[:, m].sum(axis=1),
        cols_helped=t[:, :, h].sum(axis=1), cols_harmed=t[:, :, m].sum(axis=1),
        helped_helped=t[:, h, h], helped_harmed=t[:, h, m], harmed_helped=t[:, m, h],
    )  # fmt: skip


# -- columns and cells ---------------------------------------------------------------------------


class _Codes:
    """One field of every record as codes into its distinct values, sorted (by ``key``)."""

    def __init__(self, values: Sequence[Any], key: Callable[[Any], Any] | None = None) -> None:
        self.labels: list[Any] = sorted(set(values), key=key)
        lookup = {label: code for code, label in enumerate(self.labels)}
        self.codes = np.fromiter(map(lookup.__getitem__, values), dtype=np.intp, count=len(values))

    def clusters(self, at: np.ndarray) -> Clusters:
        """The records at ``at`` numbered as ``cluster_index`` numbers their values (codes sorted by
        ``repr``: the order of the values present)."""
        codes = self.codes[at]
        present = np.zeros(len(self.labels), dtype=bool)
        present[codes] = True
        return Clusters((np.cumsum(present) - 1)[codes], int(np.count_nonzero(present)))


class ComparisonColumns:
    """The fields of comparison records the sections read, as arrays (``report`` builds them once for
    every section). A cell is an array of positions into them, in the records' order, so every sum adds
    its terms in the same order as one pass over the cell's records would."""

    def __init__(self, records: Sequence[ComparisonRecord]) -> None:
        n = self.size = len(records)
        # math.log, not np.log: the logs (and the lifts and intervals made of them) are bit-identical to
        # those the record-by-record code computed
        self.log_r = np.fromiter(map(math.log, map(operator.attrgetter("r"), records)), dtype=np.float64, count=n)
        self.outcome = np.fromiter(map(OUTCOMES.index, map(operator.attrgetter("outcome"), records)),
                                   dtype=np.intp, count=n)  # fmt: skip
        self.helped = self.outcome == OUTCOMES.index("helped")
        self.harmed = self.outcome == OUTCOMES.index("harmed")
        changes = list(map(operator.attrgetter("verdict_change"), records))
        self.rescue = np.fromiter(map("rescue".__eq__, changes), dtype=bool, count=n)
        self.broke = np.fromiter(map("break".__eq__, changes), dtype=bool, count=n)
        self.skipped = np.fromiter(map(operator.attrgetter("skipped"), records), dtype=bool, count=n)
        tiers: dict[str | None, int] = {None: -1} | {tier: code for code, tier in enumerate(STANDINGS)}
        self.standing = np.fromiter(map(tiers.__getitem__, map(operator.attrgetter("standing"), records)),
                                    dtype=np.intp, count=n)  # fmt: skip
        self.problems = _Codes(list(map(operator.attrgetter("problem"), records)), key=repr)
        self.campaign, self.model, self.direction, self.family, self.replicate = (
            _Codes(list(map(operator.attrgetter(f), records)))
            for f in ("campaign", "model", "direction", "family", "replicate")
        )

    @classmethod
    def of(cls, records: Comparisons) -> ComparisonColumns:
        return records if isinstance(records, ComparisonColumns) else cls(records)

    def split(self, at: np.ndarray, *fields: str) -> list[tuple[tuple[str, ...], np.ndarray]]:
        """The positions ``at`` by the values of ``fields``, sorted, each part in its order."""
        return _split([getattr(self, f) for f in fields], at)

    def reverse(self) -> np.ndarray:
        """Each comparison's reverse (same campaign, model, problem and replicate, the other direction):
        its position, the last such where several are; -1 where there is none."""
        slot = np.zeros(self.size, dtype=np.int64)
        for f in (self.campaign, self.model, self.problems, self.replicate):
            slot = slot * len(f.labels) + f.codes
        labels = self.direction.labels
        flipped = np.array([labels.index(r) if (r := reverse_direction(d)) in labels else -1 for d in labels],
                           dtype=np.int64)[self.direction.codes]  # fmt: skip
        keys = slot * len(labels) + self.direction.codes
        if not self.size:
            return np.zeros(0, dtype=np.intp)
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
        last = np.concatenate((ordered[1:] != ordered[:-1], [True]))  # of equal slots, the last one counts
        known, position = ordered[last], order[last]
        wanted = slot * len(labels) + flipped
        found = np.minimum(np.searchsorted(known, wanted), known.size - 1)
        return np.where((flipped >= 0) & (known[found] == wanted), position[found], -1)


#: what the sections take: records, or their columns (``report`` makes those once)
Comparisons = Sequence[ComparisonRecord] | ComparisonColumns


def _split(fields: Sequence[_Codes], at: np.ndarray) -> list[tuple[tuple[str, ...], np.ndarray]]:
    """``at`` by the values of ``fields`` (sorted by them), each part keeping the order of ``at``."""
    if not at.size:
        return []
    key = np.zeros(at.size, dtype=np.int64)
    for f in fields:
        key = key * len(f.labels) + f.codes[at]
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    parts = []
    for start, part in zip(starts.tolist(), np.split(at[order], starts[1:]), strict=True):
        code, values = int(ordered[start]), []
        for f in reversed(fields):
            code, value = divmod(code, len(f.labels))
            values.append(f.labels[value])
        parts.append((tuple(reversed(values)), part))
    return parts


def _cells(
    fields: Mapping[str, _Codes], size: int, dims: Sequence[str], *, grouped: Sequence[str], pooled: Sequence[str]
) -> list[tuple[tuple[str, ...], np.ndarray]]:
    """Positions of ``size`` records per cell, sorted with "all" first; ``fields``: each grouped
    dimension's values. A grouped dimension in ``pooled`` also gets an "all" cell; a dimension not
    grouped is "all" everywhere."""
    everything = np.arange(size)
    cells = []
    # each way of splitting: a grouped dimension split by its values, or (pooled) "all"
    for split in itertools.product(*(((True, False) if d in pooled else (True,)) if d in grouped else (False,)
                                     for d in dims)):  # fmt: skip
        kept = [d for d, keep in zip(dims, split, strict=True) if keep]
        for values, at in _split([fields[d] for d in kept], everything):
            named = dict(zip(kept, values, strict=True))
            cells.append((tuple(named.get(d, ALL) for d in dims), at))
    return sorted(cells, key=lambda kv: tuple((v != ALL, v) for v in kv[0]))


def _per_model(columns: ComparisonColumns) -> list[tuple[str, np.ndarray]]:
    """The pooled cell ("all") first, then one per model."""
    everything = np.arange(columns.size)
    return [(ALL, everything), *((model, at) for (model,), at in columns.split(everything, "model"))]


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

    columns = ComparisonColumns(comparisons)
    return {
        "groups": groups(columns, by),
        "solo": solo(solos, by),
        "standing": standing(columns),
        "standing_gradient": standing_gradient(columns),
        "sensitivity": sensitivity(columns),
        "asymmetry": asymmetry(columns),
        "controls": control_rows(comparisons, controls or {}),
        "aa_standing": aa_standing(controls or {}),
        "by": list(by),
        "campaigns": list(campaigns),
        "comparisons": {"resolved": len(comparisons), "pending": pending},
    }
