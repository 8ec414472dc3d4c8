"""A filter test's report: filtered vs unfiltered paired lift per model × direction on the shared
comparisons (same model, problem, direction, replicate, same solo baseline), with paired sign and
Wilcoxon signed-rank tests on the per-comparison change of log r."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from mkbsim.metrics import harm_rate, help_rate, paired_lift, sign_test_p, wilcoxon_signed_rank_p
from mkbsim.skills._tables import pvalue, render, share, signed

ALL = "all"
#: (model, problem, direction, replicate)
Key = tuple[str, str, str, int]


def filter_test_report(
    before: Mapping[Key, float], after: Mapping[Key, float], models: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """One row per model × direction, per model over both directions, and over everything, on the
    comparisons both sides resolved: r unfiltered (``before``) and filtered (``after``), from
    ``lab.transfer.ratios``."""
    shared = sorted(k for k in before.keys() & after.keys() if models is None or k[0] in models)
    cells: dict[tuple[str, str], list[Key]] = {}
    for key in shared:
        model, _, direction, _ = key
        for cell in ((model, direction), (model, ALL), (ALL, ALL)):
            cells.setdefault(cell, []).append(key)
    rows = []
    # per model its directions, then the model pooled; everything pooled last
    order = sorted(cells, key=lambda cell: (cell[0] == ALL, cell[0], cell[1] == ALL, cell[1]))
    for model, direction in order:
        keys = cells[(model, direction)]
        r0, r1 = [before[k] for k in keys], [after[k] for k in keys]
        changes = [math.log(b) - math.log(a) for a, b in zip(r0, r1, strict=True)]
        rows.append({
            "model": model, "direction": direction, "n": len(keys),
            "changed": sum(1 for c in changes if c != 0),
            "lift_unfiltered": paired_lift(r0), "lift_filtered": paired_lift(r1),
            "lift_change": paired_lift(r1) - paired_lift(r0),
            "help_unfiltered": help_rate(r0), "help_filtered": help_rate(r1),
            "harm_unfiltered": harm_rate(r0), "harm_filtered": harm_rate(r1),
            "sign_p": sign_test_p(changes), "wilcoxon_p": wilcoxon_signed_rank_p(changes),
        })  # fmt: skip
    return rows


def render_filter_test(rows: Sequence[dict[str, Any]], filter_name: str, base: str, filtered: str) -> str:
    headers = ("model", "direction", "n", "chg", "lift", "filtered", "Δlift", "harm", "→harm", "sign p", "wilc p")
    body = [
        (r["model"], r["direction"], str(r["n"]), str(r["changed"]), signed(r["lift_unfiltered"]),
         signed(r["lift_filtered"]), signed(r["lift_change"]), share(r["harm_unfiltered"]),
         share(r["harm_filtered"]), pvalue(r["sign_p"]), pvalue(r["wilcoxon_p"]))
        for r in rows
    ]  # fmt: skip
    title = (f"filter test {filter_name}: campaign {filtered} vs {base} (unfiltered), shared comparisons;\n"
             "chg = comparisons whose r changed; p: paired tests on the change of log r")  # fmt: skip
    return render(title, headers, body)
