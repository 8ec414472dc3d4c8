"""Control arms next to the treatment they control (DESIGN §4, §6): ``mkbsim report --section controls``
and the JSON ``controls`` list.

Each row is a control arm's cell (model × direction, with "all" pooled rows), carrying the arm's own
statistics exactly as a ``groups`` row does plus ``arm``, the treatment's lift, help and harm on the
same slots (campaign, model, problem, replicate, direction), and treatment − control differences. A
difference's interval resamples problems once for both arms (they share baselines, so a problem's
treatment and control comparisons move together); its ``difference_p`` is read off the same resamples
and Holm/BH adjusted across the table. ``aa_standing`` is the standing analysis of the A/A arm: a
gradient that appears with no skill at all is regression to the mean, not transfer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from mkbsim.metrics._clusters import ClusterBootstrap, add_adjusted, bootstrap_p, percentile_interval
from mkbsim.metrics._sections import ALL, ComparisonRecord, Row, _cell_seed, cell_stats, standing, standing_gradient

CONTROL_ARMS = ("aa", "placebo", "matched")


def control_rows(treatments: Sequence[ComparisonRecord], arms: Mapping[str, Sequence[ComparisonRecord]]) -> list[Row]:
    """One row per control arm × (model, direction) cell, pooled cells included."""
    rows: list[Row] = []
    present = [a for a in CONTROL_ARMS if arms.get(a)]
    by_slot = {_slot(c): c for c in treatments} if present else {}  # most campaigns have no control arm
    for arm in present:
        for key, cell in _cells(arms[arm]):
            # the treatment on the same slots (a control may cover fewer models, problems or replicates)
            treated = [t for c in cell if (t := by_slot.get(_slot(c))) is not None]
            row = {"model": key[0], "direction": key[1], "family": ALL, "arm": arm}
            row |= cell_stats(cell, seed=_cell_seed((arm, *key), 0))
            row |= _against(treated, cell)
            rows.append(row)
    add_adjusted(rows, "difference_p")
    return rows


def aa_standing(arms: Mapping[str, Sequence[ComparisonRecord]]) -> dict[str, list[Row]]:
    """The standing table and gradient of the A/A arm (empty without one)."""
    aa = list(arms.get("aa", ()))
    return {"standing": standing(aa), "standing_gradient": standing_gradient(aa)} if aa else {
        "standing": [], "standing_gradient": []}  # fmt: skip


def _cells(records: Sequence[ComparisonRecord]) -> list[tuple[tuple[str, str], list[ComparisonRecord]]]:
    cells: dict[tuple[str, str], list[ComparisonRecord]] = {}
    for c in records:
        for key in ((ALL, ALL), (c.model, ALL), (c.model, c.direction), (ALL, c.direction)):
            cells.setdefault(key, []).append(c)
    return sorted(cells.items(), key=lambda kv: tuple((v != ALL, v) for v in kv[0]))


def _slot(c: ComparisonRecord) -> tuple[str, str, str, int, str]:
    return c.campaign, c.model, c.problem, c.replicate, c.direction


def _against(treated: Sequence[ComparisonRecord], control: Sequence[ComparisonRecord]) -> Row:
    """The treatment's lift, help and harm on the cell, and treatment − control with intervals (the
    report's common random numbers: seed 0)."""
    if not treated:
        return {"treatment_n": 0, "treatment_paired_lift": None, "treatment_help_rate": None,
                "treatment_harm_rate": None, "lift_difference": None, "lift_difference_ci": None,
                "help_difference": None, "help_difference_ci": None, "harm_difference": None,
                "harm_difference_ci": None, "difference_p": None}  # fmt: skip
    both = [*treated, *control]
    is_t = np.array([1.0] * len(treated) + [0.0] * len(control))
    is_c = 1.0 - is_t
    logs = np.array([math.log(c.r) for c in both])
    helped = np.array([c.outcome == "helped" for c in both], dtype=float)
    harmed = np.array([c.outcome == "harmed" for c in both], dtype=float)
    boot = ClusterBootstrap([c.problem for c in both])
    lift = boot.replicates(lambda lt, nt, lc, nc: np.expm1(lt / nt) - np.expm1(lc / nc),
                           logs * is_t, is_t, logs * is_c, is_c)  # fmt: skip

    def rate_gap(marked: np.ndarray) -> np.ndarray:
        return boot.replicates(lambda mt, nt, mc, nc: mt / nt - mc / nc, marked * is_t, is_t, marked * is_c, is_c)

    help_gap, harm_gap = rate_gap(helped), rate_gap(harmed)
    t_lift = math.expm1(math.fsum(logs * is_t) / len(treated))
    c_lift = math.expm1(math.fsum(logs * is_c) / len(control))
    t_help, c_help = float(helped @ is_t) / len(treated), float(helped @ is_c) / len(control)
    t_harm, c_harm = float(harmed @ is_t) / len(treated), float(harmed @ is_c) / len(control)
    return {
        "treatment_n": len(treated), "treatment_paired_lift": t_lift, "treatment_help_rate": t_help,
        "treatment_harm_rate": t_harm,
        "lift_difference": t_lift - c_lift, "lift_difference_ci": percentile_interval(lift),
        "help_difference": t_help - c_help, "help_difference_ci": percentile_interval(help_gap),
        "harm_difference": t_harm - c_harm, "harm_difference_ci": percentile_interval(harm_gap),
        "difference_p": bootstrap_p(lift),
    }  # fmt: skip
