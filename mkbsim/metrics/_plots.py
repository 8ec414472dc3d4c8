"""PNG figures of a report (matplotlib, Agg backend): lift with CIs by model and direction, help and
harm by source standing, lift by family as a heat map."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mkbsim.metrics._sections import ALL, Row

if TYPE_CHECKING:
    from matplotlib.figure import Figure

HELP_COLOR = "#2a9d8f"
HARM_COLOR = "#e76f51"
DIRECTION_COLORS = {"cutedsl2tirx": "#264653", "tirx2cutedsl": "#e9c46a"}


def write_plots(report: Row, directory: Path) -> list[Path]:
    """Write the three figures for a report grouped by model × direction × family; returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    directory.mkdir(parents=True, exist_ok=True)
    figures = {
        "lift_by_model_direction.png": _lift_by_model_direction(report["groups"]),
        "help_harm_by_standing.png": _help_harm_by_standing(report["standing"]),
        "lift_by_family_heatmap.png": _lift_heatmap(report["groups"]),
    }
    paths = []
    for name, fig in figures.items():
        path = directory / name
        fig.savefig(path, dpi=120, bbox_inches="tight")
        paths.append(path)
    import matplotlib.pyplot as plt

    plt.close("all")
    return paths


def _lift_by_model_direction(groups: list[Row]) -> Figure:
    import matplotlib.pyplot as plt

    pooled = [g for g in groups if g["family"] == ALL and g["model"] != ALL and g["direction"] != ALL]
    models = sorted({g["model"] for g in pooled})
    fig, ax = plt.subplots(figsize=(7.5, 1.4 + 0.55 * max(len(models), 1)), layout="constrained")
    offsets = {"cutedsl2tirx": -0.15, "tirx2cutedsl": 0.15}
    for direction, offset in offsets.items():
        rows = [g for g in pooled if g["direction"] == direction]
        ys = [models.index(g["model"]) + offset for g in rows]
        lifts = [100 * g["paired_lift"] for g in rows]
        errors = [
            [100 * (g["paired_lift"] - g["paired_lift_ci"][0]) for g in rows],
            [100 * (g["paired_lift_ci"][1] - g["paired_lift"]) for g in rows],
        ]
        ax.errorbar(lifts, ys, xerr=errors, fmt="o", capsize=3, color=DIRECTION_COLORS[direction],
                    label="skill " + direction.replace("2", " → ", 1))  # fmt: skip
    ax.axvline(0, color="0.4", linewidth=0.8)
    ax.set_yticks(range(len(models)), models)
    ax.invert_yaxis()
    ax.set_xlabel("paired lift over solo, % (95% bootstrap CI over problems)")
    ax.set_title("Paired lift by model and transfer direction")
    fig.legend(loc="outside lower center", ncol=2, fontsize="small", frameon=False)
    ax.grid(axis="x", color="0.9")
    return fig


def _help_harm_by_standing(standing: list[Row]) -> Figure:
    import matplotlib.pyplot as plt

    tiers = ["above", "same", "below"]
    pooled = {r["standing"]: r for r in standing if r["model"] == ALL}
    per_model = [r for r in standing if r["model"] != ALL]
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
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
    ax.set_title("Outcome by the source's standing relative to the target solo")
    ax.legend(fontsize="small", frameon=False, loc="upper right")
    return fig


def _lift_heatmap(groups: list[Row]) -> Figure:
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import TwoSlopeNorm

    cells = [g for g in groups if g["model"] != ALL and g["direction"] != ALL]
    rows = sorted({(g["model"], g["direction"]) for g in cells})
    families = [*sorted({g["family"] for g in cells if g["family"] != ALL}), ALL]
    values = np.full((len(rows), len(families)), np.nan)
    counts: dict[tuple[int, int], Any] = {}
    for g in cells:
        i, j = rows.index((g["model"], g["direction"])), families.index(g["family"])
        values[i, j] = 100 * g["paired_lift"]
        counts[i, j] = g["n"]
    fig, ax = plt.subplots(figsize=(1.6 + 1.25 * len(families), 1.2 + 0.42 * max(len(rows), 1)))
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
    ax.set_title("Paired lift by family (last column: pooled)")
    return fig
