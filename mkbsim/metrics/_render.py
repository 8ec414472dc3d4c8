"""The report as text: an 80-column table for people, CSV of the groups for tools."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from mkbsim.metrics._sections import ALL, GROUP_STATS, Row, group_dimensions

WIDTH = 80
SECTIONS = ("groups", "solo", "standing", "sensitivity", "asymmetry")


def flat_rows(rows: Sequence[Row]) -> list[Row]:
    """Rows with each [lo, hi] pair split into ``<key>_lo`` and ``<key>_hi`` (CSV, Parquet)."""
    out = []
    for row in rows:
        flat: Row = {}
        for key, value in row.items():
            if key.endswith("_ci"):
                flat[f"{key}_lo"], flat[f"{key}_hi"] = value if value is not None else (None, None)
            else:
                flat[key] = value
        out.append(flat)
    return out


def groups_csv(report: Row) -> str:
    """The groups section as CSV; floats keep every digit (Python's shortest round-trip repr)."""
    columns = [*group_dimensions(report["by"]), *GROUP_STATS]
    fields = [c for name in columns for c in ((f"{name}_lo", f"{name}_hi") if name.endswith("_ci") else (name,))]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(flat_rows(report["groups"]))
    return buffer.getvalue()


def table(report: Row, *, store: str) -> str:
    counts = report["comparisons"]
    campaigns = report["campaigns"]
    shown = ", ".join(campaigns[:3]) + (f" and {len(campaigns) - 3} more" if len(campaigns) > 3 else "")
    lines = [
        _fit(f"Transfer report · {store} · campaign{'s' * (len(campaigns) != 1)} {shown or 'none'}"),
        f"{counts['resolved']:,} resolved comparisons, {counts['pending']:,} pending (plain protocol)",
    ]
    if not report["groups"]:
        lines.append("No resolved comparison yet: a comparison needs its treatment and baseline finished.")
    else:
        lines += _groups(report)
        lines += _sensitivity(report["sensitivity"])
        lines += _standing(report["standing"])
        lines += _gradient(report["standing_gradient"])
        lines += _asymmetry(report["asymmetry"])
    lines += _solo(report["solo"])
    return "\n".join(lines) + "\n"


def controls_table(report: Row, *, store: str) -> str:
    """``--section controls``: each control arm beside the treatment, per model × direction."""
    lines = [_fit(f"Controls · {store} · campaign{'s' * (len(report['campaigns']) != 1)} "
                  f"{', '.join(report['campaigns'][:3]) or 'none'}")]  # fmt: skip
    rows = report["controls"]
    if not rows:
        return "\n".join([*lines, "No resolved control comparison (run with --controls aa,placebo,matched)."]) + "\n"
    lines += ["Per model × direction: the treatment (skill) on the control's slots, then each",
              "control arm; Δ = treatment − control, 95% cluster-bootstrap CI over problems;",
              "pHolm: Δlift's bootstrap p, Holm-adjusted across the table"]  # fmt: skip
    sections: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        sections.setdefault((row["model"], row["direction"]), []).append(row)
    headers = ["arm", "n", "lift", "help", "harm", "Δlift", "95% CI", "Δhelp", "Δharm", "pHolm"]
    for (model, direction), cell in sections.items():
        lines += ["", _fit(f"{model} · {_label('direction', direction)}")]
        body = [["skill", str(cell[0]["treatment_n"]), _signed(cell[0]["treatment_paired_lift"]),
                 _share(cell[0]["treatment_help_rate"]), _share(cell[0]["treatment_harm_rate"]), "", "", "", "", ""]]
        body += [
            [r["arm"], str(r["n"]), _signed(r["paired_lift"]), _share(r["help_rate"]), _share(r["harm_rate"]),
             _signed(r["lift_difference"]), _interval(r["lift_difference_ci"]), _signed(r["help_difference"]),
             _signed(r["harm_difference"]), _p(r["difference_p_holm"])]
            for r in cell
        ]  # fmt: skip
        lines += _format(headers, body, "lrrrrrrrrr")
    aa = report["aa_standing"]
    if aa["standing"]:
        lines += ["", "A/A arm (a second solo, no skill): how much of the standing gradient is",
                  "regression to the mean"]  # fmt: skip
        lines += _standing(aa["standing"])[3:]
        lines += _gradient(aa["standing_gradient"])
    return "\n".join(lines) + "\n"


def model_table(result: Row) -> str:
    """``--section model``: the runtime mixed model's cells and variances, then the flip models."""
    lines = [f"Mixed-effects models over {result['n']:,} resolved comparisons"]
    rt = result["runtime"]
    if rt is None:
        lines.append("runtime model: too few problems with both arms passing")
    elif rt["terms"] is None:
        lines += [_fit(f"runtime: {rt['formula']}"), "  no optimiser could fit it:",
                  *(_fit(f"    {f['method']}: {f['error']}") for f in rt["fits"])]  # fmt: skip
    else:
        tried = ", ".join(f"{f['method']} " + ("failed" if f["log_likelihood"] is None else
                          f"{_decimal(f['log_likelihood'], 2)}{'' if f['converged'] else '*'}")
                          for f in rt["fits"])  # fmt: skip
        lines += [_fit(f"runtime: {rt['formula']}"),
                  f"  on {rt['n']:,} comparisons where both arms passed, {rt['problems']} problems",
                  f"  fit: {rt['method']}, REML log-likelihood {_decimal(rt['log_likelihood'], 2)}, "
                  f"converged: {'yes' if rt['converged'] else 'NO'}",
                  *([] if rt["converged"] else ["  no optimiser converged: the estimates below are not reliable"]),
                  "  optimisers tried, REML log-likelihood (* not converged):", _fit(f"    {tried}"),
                  f"  variance: problem {_decimal(rt['problem_variance'], 4)}, residual "
                  f"{_decimal(rt['residual_variance'], 4)}",
                  "  predicted lift per cell (families averaged), 95% Wald CI:"]  # fmt: skip
        body = [[c["model"], _label("direction", c["direction"]), _signed(c["lift"]), _interval(c["lift_ci"])]
                for c in rt["cells"]]  # fmt: skip
        lines += _format(["model", "direction", "lift", "95% CI"], body, "llrr")
    for flip in result["flips"]:
        lines += ["", f"{flip['flip']} model: logistic, model + direction, SE clustered by problem; "
                      f"{flip['events']} of {flip['n']}"]  # fmt: skip
        lines += [_fit(f"  separated, left out of the fit: {s['factor']} {s['level']} ({s['events']} of {s['n']})")
                  for s in flip["separated"]]  # fmt: skip
        if flip["note"] is not None:
            lines.append(_fit(f"  {flip['note']}"))
        if flip["terms"] is None:
            continue
        body = [[t["term"], _decimal(t["log_odds"], 3), _decimal(t["se"], 3), _p(t["p"])] for t in flip["terms"]]
        lines += _format(["term", "log odds", "se", "p"], body, "lrrr")
    return "\n".join(lines) + "\n"


def robustness_table(result: Row) -> str:
    """``--section robustness``: what keeps its sign under each metric variant."""
    lines = ["Robustness of the metric: each variant rescored from the verdicts and runtimes", "",
             "sign kept: model × direction lifts with the default's sign; +both/−both: models",
             "with lift above/below 0 in both directions; CI>0, CI<0: cells whose 95% CI excludes 0"]  # fmt: skip
    body = [[s["variant"], f"{s['cells_keeping_sign']}/{s['cells']}", str(s["models_positive_both"]),
             str(s["models_negative_both"]), str(s["cells_ci_above_zero"]), str(s["cells_ci_below_zero"])]
            for s in result["summary"]]  # fmt: skip
    lines += _format(["variant", "sign kept", "+both", "−both", "CI>0", "CI<0"], body, "lrrrrr")
    lines += ["", "lift per cell and variant (a trailing ! marks a sign the default does not have)"]
    cells: dict[tuple[str, str], dict[str, Row]] = {}
    for c in result["cells"]:
        cells.setdefault((c["model"], c["direction"]), {})[c["variant"]] = c
    short = {v: f"v{i}" for i, v in enumerate(result["variants"])}
    legend = [f"{k}: {v}" for v, k in short.items()]
    lines += ["  " + ", ".join(legend[i : i + 3]) for i in range(0, len(legend), 3)]
    body = [[m, _label("direction", d), *(_signed(row[v]["paired_lift"]) + ("" if row[v]["keeps_sign"] else "!")
                                          if v in row else "–" for v in result["variants"])]
            for (m, d), row in cells.items()]  # fmt: skip
    lines += _format(["model", "dir", *short.values()], body, "ll" + "r" * len(short))
    return "\n".join(lines) + "\n"


def _groups(report: Row) -> list[str]:
    by = list(report["by"])
    label_dim = by[-1] if by else "family"
    heading_dims = by[:-1]
    lines = [
        "",
        "Paired lift (geometric mean of r − 1) by " + (" × ".join(by) or "nothing (all pooled)"),
        "CI: 95% over problems (bootstrap; t on log r under 20 problems*) · resc, brk:",
        "verdict changes among helped, harmed · p: sign flips of problems' log r, pHolm",
    ]
    sections: dict[tuple[str, ...], list[Row]] = {}
    for row in report["groups"]:
        sections.setdefault(tuple(row[d] for d in heading_dims), []).append(row)
    headers = [label_dim, "n", "lift", "95% CI", "help", "harm", "resc", "brk", "p", "pHolm"]
    for heading, rows in sections.items():
        lines.append("")
        if heading:
            lines.append(_fit(" · ".join(_label(d, v) for d, v in zip(heading_dims, heading, strict=True))))
        body = [
            [_label(label_dim, r[label_dim]), str(r["n"]), _signed(r["paired_lift"]),
             _interval(r["paired_lift_ci"]) + "*" * (r["paired_lift_ci_method"] == "t"),
             _share(r["help_rate"]), _share(r["harm_rate"]), str(r["helped_verdict_change"]),
             str(r["harmed_verdict_change"]), _p(r["p"]), _p(r["p_holm"])]
            for r in rows
        ]  # fmt: skip
        lines += _format(headers, body, "lrrrrrrrrr")
    return lines


def _solo(rows: Sequence[Row]) -> list[str]:
    pooled = [r for r in rows if r.get("family", ALL) == ALL]
    if not pooled:
        return ["", "No resolved solo attempt."]
    lines = ["", "Solo attempts: scored pass rate, passing-only geometric-mean speedup;",
             "inline: verifier passes excluded for inline CUDA; partial: scored passes",
             "whose eager code made the products (per family: --format json)"]  # fmt: skip
    headers = ["model", "dsl", "n", "pass", "speedup", "inline", "partial"]
    align = "llrrrrr"
    body = [
        [r["model"], r["dsl"], str(r["n"]), _share(r["pass_rate"]), _times(r["speedup_geomean"]),
         str(r["inline_cuda_excluded"]), str(r["partial_plans"])]
        for r in pooled
    ]  # fmt: skip
    return [*lines, *_format(headers, body, align)]


def _standing(rows: Sequence[Row]) -> list[str]:
    if not rows:
        return []
    lines = ["", "Source standing vs the target solo (tiers: 0 failed, else 1 + speedup",
             "thresholds 0.5, 1, 2, 4 reached); pooled over directions"]  # fmt: skip
    headers = ["model", "standing", "n", "help", "harm", "lift"]
    align = "llrrrr"
    body = [
        [r["model"], r["standing"], str(r["n"]), _share(r["help_rate"]), _share(r["harm_rate"]),
         _signed(r["paired_lift"])]
        for r in rows
    ]  # fmt: skip
    return [*lines, *_format(headers, body, align)]


def _gradient(rows: Sequence[Row]) -> list[str]:
    if not rows:
        return []
    lines = ["", "Standing gradient: help above − below, harm below − above (points, 95% CI);",
             "p: standing labels shuffled within problems, Holm-adjusted over the table"]  # fmt: skip
    headers = ["model", "help gap", "95% CI", "pHolm", "harm gap", "95% CI", "pHolm"]
    body = [
        [r["model"], _signed(r["help_gap"]), _interval(r["help_gap_ci"]), _p(r["help_gap_p_holm"]),
         _signed(r["harm_gap"]), _interval(r["harm_gap_ci"]), _p(r["harm_gap_p_holm"])]
        for r in rows
    ]  # fmt: skip
    return [*lines, *_format(headers, body, "lrrrrrr")]


def _sensitivity(rows: Sequence[Row]) -> list[str]:
    lines = ["", "Family sensitivity: each cell's lift without its best family;",
             "fam+, fam-: families with positive, negative lift"]  # fmt: skip
    headers = ["model", "direction", "lift", "fam+", "fam-", "best family", "its lift", "without"]
    align = "llrrrlrr"
    body = [
        [r["model"], _label("direction", r["direction"]), _signed(r["paired_lift"]), str(r["families_positive"]),
         str(r["families_negative"]), r["best_family"], _signed(r["best_family_lift"]),
         _signed(r["lift_without_best"])]
        for r in rows
    ]  # fmt: skip
    return [*lines, *_format(headers, body, align)]


def _asymmetry(rows: Sequence[Row]) -> list[str]:
    lines = ["", "Direction asymmetry: how the reverse direction (same model, problem,",
             "replicate) fared for helped comparisons: share of those resolved (count);",
             "gap = harmed − helped share; p: reverse outcomes shuffled within model, Holm"]  # fmt: skip
    headers = ["model", "helped", "reverse n", "rev harmed", "rev helped", "gap", "pHolm"]
    body = [
        [r["model"], str(r["helped"]), str(r["reverse_resolved"]),
         _share_of(r["reverse_harmed"], r["reverse_resolved"]), _share_of(r["reverse_helped"], r["reverse_resolved"]),
         _signed(r["gap"]), _p(r["p_holm"])]
        for r in rows
    ]  # fmt: skip
    return [*lines, *_format(headers, body, "lrrrrrr")]


# -- formatting ----------------------------------------------------------------------------------


def _format(headers: Sequence[str], body: Sequence[Sequence[str]], align: str) -> list[str]:
    """Columns sized to their content, aligned by ``align`` ("l" or "r" per column). While the table
    is wider than WIDTH, the widest left-aligned column is shortened (ellipsis), down to its header."""
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(headers)]
    while sum(widths) + len(widths) - 1 > WIDTH:
        shrinkable = [i for i, a in enumerate(align) if a == "l" and widths[i] > max(len(headers[i]), 4)]
        if not shrinkable:
            break
        widths[max(shrinkable, key=lambda i: widths[i])] -= 1
    lines = []
    for row in [list(headers), *body]:
        cells = [
            _clip(cell, w).ljust(w) if a == "l" else cell.rjust(w)
            for cell, w, a in zip(row, widths, align, strict=True)
        ]
        lines.append(" ".join(cells).rstrip())
    return lines


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _fit(text: str) -> str:
    return _clip(text, WIDTH)


def _label(dim: str, value: str) -> str:
    if dim == "direction" and value != ALL:
        return value.replace("2", "→", 1)
    return value


def _signed(x: Any) -> str:
    return "–" if x is None else f"{x * 100:+.1f}%"


def _share(x: Any) -> str:
    return "–" if x is None else f"{x * 100:.1f}%"


def _share_of(count: int, total: int) -> str:
    return f"{_share(count / total)} ({count})" if total else "–"


def _interval(ci: Sequence[float] | None) -> str:
    if ci is None:
        return "–"
    lo, hi = ci
    return f"[{lo * 100:+.1f}, {hi * 100:+.1f}]"


def _p(p: Any) -> str:
    if p is None:
        return "–"
    return "<.001" if p < 0.001 else f"{p:.3f}"


def _decimal(x: Any, digits: int) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _times(x: Any) -> str:
    return "–" if x is None else f"{x:.2f}×"
