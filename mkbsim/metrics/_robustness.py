"""`mkbsim report --section robustness`: the paired lift, help and harm of every model × direction cell
rescored under other metric settings (DESIGN §6 fixes the defaults), and which conclusions keep their
sign: each cell's lift, and the study's headline counts (models positive / negative in both directions).

Variants: clip bounds [1/2, 2] and [1/8, 8] (verdict flips weigh as the bounds, as in the default);
flips weighing 2 or 8 with the default clip; help/harm thresholds 1.1 and 1.5 (harm at the reciprocal);
verdict flips (rescues and breaks) excluded. Intervals as in ``groups``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mkbsim.metrics._clusters import ClusterBootstrap, ratio_of_sums
from mkbsim.metrics._rules import CLIP_HIGH, CLIP_LOW, HARM_AT, HELP_AT, outcome, ratio
from mkbsim.metrics._sections import ALL, lift_interval
from mkbsim.metrics._stats import lift_of_logs

if TYPE_CHECKING:
    from mkbsim.lab import VerdictRecord

Row = dict[str, Any]


@dataclass(frozen=True)
class Variant:
    name: str
    clip: tuple[float, float] = (CLIP_LOW, CLIP_HIGH)
    flips: tuple[float, float] = (CLIP_LOW, CLIP_HIGH)
    help_at: float = HELP_AT
    harm_at: float = HARM_AT
    keep_flips: bool = True


VARIANTS = (
    Variant("default"),
    Variant("clip [1/2, 2]", clip=(0.5, 2.0), flips=(0.5, 2.0)),
    Variant("clip [1/8, 8]", clip=(0.125, 8.0), flips=(0.125, 8.0)),
    Variant("flips weigh 2", flips=(0.5, 2.0)),
    Variant("flips weigh 8", flips=(0.125, 8.0)),
    Variant("help/harm at 1.1", help_at=1.1, harm_at=1 / 1.1),
    Variant("help/harm at 1.5", help_at=1.5, harm_at=1 / 1.5),
    Variant("verdict flips excluded", keep_flips=False),
)


def robustness(records: Sequence[VerdictRecord], progress: Callable[[str], None] | None = None) -> Row:
    """Per variant: every model × direction cell (and the pooled one), and a summary of what kept its sign."""
    cells: list[Row] = []
    summary: list[Row] = []
    default_signs: dict[tuple[str, str], int] = {}
    for variant in VARIANTS:
        if progress:
            progress(variant.name)
        rows = _cells(records, variant)
        for row in rows:
            key = (row["model"], row["direction"])
            default_signs.setdefault(key, row["sign"])
            row["keeps_sign"] = row["sign"] == default_signs[key]
        cells += rows
        per_model = [r for r in rows if r["model"] != ALL and r["direction"] != ALL]
        signs: dict[str, list[int]] = {}
        for r in per_model:
            signs.setdefault(r["model"], []).append(r["sign"])
        summary.append({
            "variant": variant.name, "cells": len(per_model),
            "cells_keeping_sign": sum(1 for r in per_model if r["keeps_sign"]),
            "models_positive_both": sum(1 for s in signs.values() if len(s) == 2 and min(s) > 0),
            "models_negative_both": sum(1 for s in signs.values() if len(s) == 2 and max(s) < 0),
            "cells_ci_above_zero": sum(1 for r in per_model if r["paired_lift_ci"][0] > 0),
            "cells_ci_below_zero": sum(1 for r in per_model if r["paired_lift_ci"][1] < 0),
        })  # fmt: skip
    return {"variants": [v.name for v in VARIANTS], "cells": cells, "summary": summary}


def _cells(records: Sequence[VerdictRecord], v: Variant) -> list[Row]:
    kept = [c for c in records if v.keep_flips or c.verdict_change not in ("rescue", "break")]
    groups: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for c in kept:
        r = ratio(c.baseline_passed, c.baseline_runtime_ms, c.treatment_passed, c.treatment_runtime_ms,
                  skipped=c.skipped, clip=v.clip, flips=v.flips)  # fmt: skip
        for key in ((ALL, ALL), (c.model, c.direction)):
            groups.setdefault(key, []).append((c.problem, r))
    rows = []
    for (model, direction), cell in sorted(groups.items(), key=lambda kv: tuple((x != ALL, x) for x in kv[0])):
        problems = [p for p, _ in cell]
        logs = [math.log(r) for _, r in cell]
        outcomes = [outcome(r, help_at=v.help_at, harm_at=v.harm_at) for _, r in cell]
        boot = ClusterBootstrap(problems, seed=0)
        ones = [1.0] * len(cell)
        lift = lift_of_logs(logs)
        rows.append({
            "variant": v.name, "model": model, "direction": direction, "n": len(cell), "paired_lift": lift,
            "paired_lift_ci": lift_interval(logs, problems, boot)[0],
            "help_rate": outcomes.count("helped") / len(cell),
            "help_rate_ci": boot.interval(ratio_of_sums, [o == "helped" for o in outcomes], ones),
            "harm_rate": outcomes.count("harmed") / len(cell),
            "harm_rate_ci": boot.interval(ratio_of_sums, [o == "harmed" for o in outcomes], ones),
            "sign": (lift > 0) - (lift < 0),
        })  # fmt: skip
    return rows
