"""PNG figures (matplotlib, Agg backend), each naming its campaign in its title:

- ``mkbsim report --plots``: lift with CIs by model and direction, the control arms beside each cell (a
  forest plot); help and harm by source standing; lift by family as a heat map;
- ``mkbsim chain --plots``: lift, pass rate and claim survival by hop, per model and pooled;
- ``mkbsim filter-test --plots``: unfiltered vs filtered lift and the change, per model × direction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mkbsim.metrics._sections import ALL, Row

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

HELP_COLOR = "#2a9d8f"
HARM_COLOR = "#e76f51"
ARM_STYLES = {  # arm → (colour, marker, legend label)
    "skill": ("#264653", "o", "skill (treatment)"),
    "aa": ("#8d99ae", "s", "A/A: a second solo"),
    "placebo": ("#9b5de5", "^", "placebo: another problem's skill"),
    "matched": ("#f4a261", "D", "matched: a neutral note"),
}
SURVIVAL_SERIES = (("origin_survival", "origin's claims kept", "#264653"),
                   ("carried", "previous hop's claims carried", "#2a9d8f"),
                   ("unverified_carried", "previous hop's unverified claims carried", "#e76f51"))  # fmt: skip


def campaign_note(campaigns: Sequence[str]) -> str:
    """'campaign X', or 'campaigns X, Y and N more (pooled)': what every figure's title names."""
    if len(campaigns) == 1:
        return f"campaign {campaigns[0]}"
    shown = ", ".join(campaigns[:2]) + (f" and {len(campaigns) - 2} more" if len(campaigns) > 2 else "")
    return f"campaigns {shown or 'none'} (pooled)"


def save_figures(figures: Mapping[str, Figure], directory: Path) -> list[Path]:
    """Write each figure as ``directory/<name>`` (PNG) and close it; returns the paths."""
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fig in figures.items():
        path = directory / name
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)
        paths.append(path)
    return paths


def write_plots(report: Row, directory: Path) -> list[Path]:
    """Write the three figures for a report grouped by model × direction × family; returns the paths."""
    note = campaign_note(report["campaigns"])
    return save_figures({
        "lift_by_model_direction.png": _lift_forest(report["groups"], report["controls"], note),
        "help_harm_by_standing.png": _help_harm_by_standing(report["standing"], note),
        "lift_by_family_heatmap.png": _lift_heatmap(report["groups"], note),
    }, directory)  # fmt: skip


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _percent_errors(rows: Sequence[Row], value: str, ci: str) -> tuple[list[float], list[list[float]]]:
    """Values in % and their CIs as errorbar offsets (0 where a row has no interval)."""
    values = [100 * r[value] for r in rows]
    lower = [100 * (r[value] - r[ci][0]) if r[ci] else 0.0 for r in rows]
    upper = [100 * (r[ci][1] - r[value]) if r[ci] else 0.0 for r in rows]
    return values, [lower, upper]


def _direction(direction: str) -> str:
    return direction.replace("2", " → ", 1) if direction != ALL else "both directions"


def _lift_forest(groups: Sequence[Row], controls: Sequence[Row], note: str) -> Figure:
    """One line per model × direction: the treatment's lift and each control arm's, with 95% CIs."""
    plt = _pyplot()
    by_arm: dict[str, list[Row]] = {"skill": [g for g in groups if g["family"] == ALL]}
    for c in controls:
        by_arm.setdefault(c["arm"], []).append(c)
    arms = [a for a in ARM_STYLES if by_arm.get(a)]
    for arm in arms:
        by_arm[arm] = [r for r in by_arm[arm] if r["model"] != ALL and r["direction"] != ALL]
    lines = sorted({(r["model"], r["direction"]) for rows in by_arm.values() for r in rows})
    fig, ax = plt.subplots(figsize=(8.0, 1.6 + 0.42 * max(len(lines), 1) * (1 + 0.25 * (len(arms) - 1))),
                           layout="constrained")  # fmt: skip
    step = 0.7 / len(arms)
    for k, arm in enumerate(arms):
        rows = by_arm[arm]
        color, marker, label = ARM_STYLES[arm]
        lifts, errors = _percent_errors(rows, "paired_lift", "paired_lift_ci")
        ys = [lines.index((r["model"], r["direction"])) + (k - (len(arms) - 1) / 2) * step for r in rows]
        ax.errorbar(lifts, ys, xerr=errors, fmt=marker, capsize=2.5, color=color, markersize=5, label=label)
    ax.axvline(0, color="0.4", linewidth=0.8)
    ax.set_yticks(range(len(lines)), [f"{m} · {_direction(d)}" for m, d in lines])
    for boundary in range(1, len(lines)):
        if lines[boundary][0] != lines[boundary - 1][0]:
            ax.axhline(boundary - 0.5, color="0.85", linewidth=0.8)
    ax.invert_yaxis()
    ax.set_xlabel("paired lift over solo, % (95% CI over problems; t interval under 20 problems)")
    ax.set_title(f"Paired lift by model and direction{', beside the control arms' if len(arms) > 1 else ''}\n"
                 f"{note}", fontsize="medium")  # fmt: skip
    fig.legend(loc="outside lower center", ncol=min(len(arms), 2), fontsize="small", frameon=False)
    ax.grid(axis="x", color="0.9")
    return fig


def _help_harm_by_standing(standing: Sequence[Row], note: str) -> Figure:
    plt = _pyplot()
    tiers = ["above", "same", "below"]
    pooled = {r["standing"]: r for r in standing if r["model"] == ALL}
    per_model = [r for r in standing if r["model"] != ALL]
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    width = 0.36
    for k, (key, color, label) in enumerate((("help_rate", HELP_COLOR, "helped (r ≥ 5/4)"),
                                             ("harm_rate", HARM_COLOR, "harmed (r ≤ 4/5)"))):  # fmt: skip
        xs = [i + (k - 0.5) * width for i in range(len(tiers))]
        heights = [100 * pooled[t][key] if t in pooled else 0.0 for t in tiers]
        bars = ax.bar(xs, heights, width, color=color, label=f"{label}, all models")
        ax.bar_label(bars, labels=[f"{h:.0f}%" if h >= 6 else "" for h in heights], label_type="center",
                     color="white", fontsize="small", fontweight="bold")  # fmt: skip
        model_x = [xs[tiers.index(r["standing"])] + 0.3 * width for r in per_model]  # beside the bar's label
        ax.scatter(model_x, [100 * r[key] for r in per_model], s=14, color="black", alpha=0.55, zorder=3,
                   label="one model" if k == 0 else None)  # fmt: skip
    ax.set_xticks(range(len(tiers)),
                  [f"source {t}\n(n = {pooled[t]['n'] if t in pooled else 0})" for t in tiers])  # fmt: skip
    ax.set_ylabel("share of comparisons, %")
    ax.set_ylim(0, 105)
    ax.set_title(f"Outcome by the source's standing relative to the target solo\n{note}", fontsize="medium")
    ax.legend(fontsize="small", frameon=False, loc="upper right")
    return fig


def _lift_heatmap(groups: Sequence[Row], note: str) -> Figure:
    import numpy as np
    from matplotlib.colors import TwoSlopeNorm

    plt = _pyplot()
    cells = [g for g in groups if g["model"] != ALL and g["direction"] != ALL]
    rows = sorted({(g["model"], g["direction"]) for g in cells})
    families = [*sorted({g["family"] for g in cells if g["family"] != ALL}), ALL]
    values = np.full((len(rows), len(families)), np.nan)
    counts: dict[tuple[int, int], Any] = {}
    for g in cells:
        i, j = rows.index((g["model"], g["direction"])), families.index(g["family"])
        values[i, j] = 100 * g["paired_lift"]
        counts[i, j] = g["n"]
    fig, ax = plt.subplots(figsize=(1.6 + 1.25 * len(families), 1.4 + 0.42 * max(len(rows), 1)))
    span = float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0
    image = ax.imshow(values, cmap="RdBu", norm=TwoSlopeNorm(0.0, -max(span, 1.0), max(span, 1.0)), aspect="auto")
    for (i, j), n in counts.items():
        shade = abs(values[i, j]) > 0.6 * span
        ax.text(j, i, f"{values[i, j]:+.0f}%\nn={n}", ha="center", va="center", fontsize=7,
                color="white" if shade else "black")  # fmt: skip
    ax.set_xticks(range(len(families)), [f.replace("_", " ") for f in families], rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), [f"{m} · {d.replace('2', '→', 1)}" for m, d in rows])
    ax.axvline(len(families) - 1.5, color="black", linewidth=1.0)
    fig.colorbar(image, ax=ax, label="paired lift, %", shrink=0.8)
    ax.set_title(f"Paired lift by family (last column: pooled)\n{note}", fontsize="medium")
    return fig


def chain_figure(rows: Sequence[Row], campaign_id: str, linking: str) -> Figure:
    """``mkbsim chain``: lift vs solo and scored pass rate by hop (each model, and pooled with 95% CIs),
    and the pooled claim survival by hop with 95% CIs."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13.5, 4.6), layout="constrained")
    models = sorted({r["model"] for r in rows if r["model"] != ALL})
    palette = plt.get_cmap("tab10")
    for ax, (value, label) in zip(axes[:2], (("paired_lift", "paired lift vs solo, %"),
                                              ("pass_rate", "scored pass rate, %")), strict=True):  # fmt: skip
        for i, model in enumerate(models):
            mine = [r for r in rows if r["model"] == model and r[value] is not None]
            ax.plot([r["hop"] for r in mine], [100 * r[value] for r in mine], marker=".", linewidth=1.0,
                    color=palette(i % 10), alpha=0.75, label=model)  # fmt: skip
        _hop_series(ax, [r for r in rows if r["model"] == ALL], value, "black", "all models (95% CI)", width=2.2)
        ax.set_ylabel(label)
    axes[0].axhline(0, color="0.4", linewidth=0.8)
    pooled = [r for r in rows if r["model"] == ALL]
    for value, label, color in SURVIVAL_SERIES:
        _hop_series(axes[2], pooled, value, color, label, width=1.6)
    axes[2].set_ylabel("share of claims, % (all models)")
    axes[2].set_ylim(0, 100)
    axes[2].set_title(f"claims linked by {linking}", fontsize="small")
    hops = sorted({r["hop"] for r in rows})
    for ax in axes:
        ax.set_xlabel("hop")
        ax.set_xticks(hops)
        ax.grid(color="0.92")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 4), fontsize="small",
               frameon=False)  # fmt: skip
    axes[2].legend(fontsize="small", frameon=False, loc="upper right")
    fig.suptitle(f"Skill chains by hop (hops alternate DSLs; both starting DSLs pooled)\nchain campaign {campaign_id}",
                 fontsize="medium")  # fmt: skip
    return fig


def _hop_series(ax: Axes, rows: Sequence[Row], value: str, color: str, label: str, *, width: float) -> None:
    present = sorted((r for r in rows if r[value] is not None), key=lambda r: r["hop"])
    values, errors = _percent_errors(present, value, f"{value}_ci")
    ax.errorbar([r["hop"] for r in present], values, yerr=errors, color=color, linewidth=width, marker="o",
                capsize=3, label=label, zorder=3)  # fmt: skip


def filter_test_figure(rows: Sequence[Row], filter_name: str, base: str, filtered: str) -> Figure:
    """``mkbsim filter-test``: per cell, unfiltered and filtered lift (95% CIs), and the change with its
    cluster-bootstrap CI and Holm-adjusted p."""
    plt = _pyplot()
    labels = [f"{'all models' if r['model'] == ALL else r['model']} · {_direction(r['direction'])}" for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11.5, 2.0 + 0.36 * max(len(rows), 1)), sharey=True,
                                      layout="constrained", gridspec_kw={"width_ratios": [1.2, 1.0]})  # fmt: skip
    ys = list(range(len(rows)))
    for key, offset, marker, color, label in (
        ("lift_unfiltered", -0.15, "o", "#8d99ae", "unfiltered"),
        ("lift_filtered", 0.15, "s", "#264653", f"filtered ({filter_name})"),
    ):
        values, errors = _percent_errors(rows, key, f"{key}_ci")
        left.errorbar(values, [y + offset for y in ys], xerr=errors, fmt=marker, color=color, capsize=2.5,
                      markersize=4.5, label=label)  # fmt: skip
    left.set_xlabel("paired lift over solo, % (95% CI over problems)")
    changes, errors = _percent_errors(rows, "lift_change", "lift_change_ci")
    right.errorbar(changes, ys, xerr=errors, fmt="o", color="#2a9d8f", capsize=2.5, markersize=4.5,
                   label="Δlift = filtered − unfiltered (95% cluster-bootstrap CI; right: Holm p)")  # fmt: skip
    for y, r in zip(ys, rows, strict=True):
        p = r.get("p_holm")
        right.annotate("no change" if p is None else f"p={p:.2g}", (1.0, y), xycoords=("axes fraction", "data"),
                       xytext=(4, 0), textcoords="offset points", va="center", fontsize=7)  # fmt: skip
    right.set_xlabel("Δlift, percentage points")
    for ax in (left, right):
        ax.axvline(0, color="0.4", linewidth=0.8)
        ax.grid(axis="x", color="0.92")
        for y, r in zip(ys[:-1], rows, strict=False):
            if r["direction"] == ALL:
                ax.axhline(y + 0.5, color="0.8", linewidth=0.8)
    left.set_yticks(ys, labels)
    left.invert_yaxis()
    fig.legend(loc="outside lower center", ncol=3, fontsize="small", frameon=False)
    fig.suptitle(f"Filter test {filter_name}: campaign {filtered} vs {base} (unfiltered), shared comparisons",
                 fontsize="medium")  # fmt: skip
    return fig
