"""A filter test's report (DESIGN §6, §9): filtered vs unfiltered paired lift, help and harm per model ×
direction (then per model and pooled) on the shared comparisons (same model, problem, direction,
replicate, same solo baseline).

The test and intervals are the report's (``mkbsim.metrics._clusters``), problems as clusters: the
comparisons of one problem (models, directions, replicates) share it, so they are resampled or flipped
together. ``p`` is the sign-flip permutation over problems of the change of log r (exact up to 12
problems), Holm/BH adjusted across the table's cells; ``wilcoxon_p`` and ``sign_p`` run on the problems'
mean change. Each side's lift has the report's interval (the t interval on log r under 20 problems);
the changes of lift, help and harm have percentile cluster-bootstrap intervals from one set of problem
resamples, the two sides of a comparison drawn together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mkbsim.metrics import outcome
from mkbsim.metrics._clusters import ClusterBootstrap, add_adjusted, sign_flip_p
from mkbsim.metrics._sections import ALL, _cell_seed, lift_interval, problem_means
from mkbsim.metrics._stats import lift_of_logs, sign_test_p, wilcoxon_signed_rank_p
from mkbsim.skills._tables import interval, pvalue, render, share, signed

#: (model, problem, direction, replicate)
Key = tuple[str, str, str, int]
Row = dict[str, Any]


def filter_test_report(
    before: Mapping[Key, float], after: Mapping[Key, float], models: Sequence[str] | None = None
) -> list[Row]:
    """One row per model × direction, per model over both directions, and over everything, on the
    comparisons both sides resolved: r unfiltered (``before``) and filtered (``after``), from
    ``lab.transfer.ratios``."""
    shared = sorted(k for k in before.keys() & after.keys() if models is None or k[0] in models)
    cells: dict[tuple[str, str], list[Key]] = {}
    for key in shared:
        model, _, direction, _ = key
        for cell in ((model, direction), (model, ALL), (ALL, ALL)):
            cells.setdefault(cell, []).append(key)
    # per model its directions, then the model pooled; everything pooled last
    order = sorted(cells, key=lambda cell: (cell[0] == ALL, cell[0], cell[1] == ALL, cell[1]))
    rows = [{"model": m, "direction": d} | _cell([before[k] for k in cells[m, d]], [after[k] for k in cells[m, d]],
                                                  [k[1] for k in cells[m, d]], seed=_cell_seed((m, d, "filter"), 0))
            for m, d in order]  # fmt: skip
    add_adjusted(rows)
    return rows


def _cell(r0: Sequence[float], r1: Sequence[float], problems: Sequence[str], *, seed: int) -> Row:
    logs0, logs1 = np.log(r0), np.log(r1)
    changes = [float(c) for c in logs1 - logs0]
    boot = ClusterBootstrap(problems, seed=seed)
    ones = np.ones(len(problems))
    lift0, lift1 = lift_of_logs(list(logs0)), lift_of_logs(list(logs1))
    row: Row = {
        "n": len(problems), "problems": boot.k, "changed": sum(1 for c in changes if c != 0),
        "lift_unfiltered": lift0, "lift_unfiltered_ci": lift_interval(list(logs0), problems, boot)[0],
        "lift_filtered": lift1, "lift_filtered_ci": lift_interval(list(logs1), problems, boot)[0],
        "lift_change": lift1 - lift0,
        "lift_change_ci": boot.interval(lambda a, b, n: np.expm1(b / n) - np.expm1(a / n), logs0, logs1, ones),
    }  # fmt: skip
    for name, marked in (("help", "helped"), ("harm", "harmed")):
        m0 = np.array([outcome(r) == marked for r in r0], dtype=float)
        m1 = np.array([outcome(r) == marked for r in r1], dtype=float)
        row |= {
            f"{name}_unfiltered": float(m0.mean()), f"{name}_filtered": float(m1.mean()),
            f"{name}_change": float(m1.mean() - m0.mean()),
            f"{name}_change_ci": boot.interval(lambda a, b, n: (b - a) / n, m0, m1, ones),
        }  # fmt: skip
    per_problem = problem_means(changes, problems)
    return row | {"p": sign_flip_p(changes, problems, seed=seed), "wilcoxon_p": wilcoxon_signed_rank_p(per_problem),
                  "sign_p": sign_test_p(per_problem)}  # fmt: skip


def render_filter_test(rows: Sequence[Row], filter_name: str, base: str, filtered: str) -> str:
    headers = ("model", "direction", "n", "chg", "lift", "filtered", "Δlift", "95% CI", "harm", "→harm", "p",
               "pHolm")  # fmt: skip
    body = [
        (r["model"], r["direction"], str(r["n"]), str(r["changed"]), signed(r["lift_unfiltered"]),
         signed(r["lift_filtered"]), signed(r["lift_change"]), interval(r["lift_change_ci"], percent=True, digits=1),
         share(r["harm_unfiltered"]), share(r["harm_filtered"]), pvalue(r["p"]), pvalue(r["p_holm"]))
        for r in rows
    ]  # fmt: skip
    title = (f"filter test {filter_name}: campaign {filtered} vs {base} (unfiltered), shared comparisons;\n"
             "chg = comparisons whose r changed; Δlift's 95% CI: cluster bootstrap over problems;\n"
             "p: sign flips of problems' change of log r, Holm across the table (pHolm)")  # fmt: skip
    return render(title, headers, body)
