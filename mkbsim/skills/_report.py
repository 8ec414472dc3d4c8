"""`mkbsim report --section skills`: what skills contain and how they are used, over plain-protocol
comparisons (no filter, no chain).

- prevalence: for each rubric category, the share of helped and of harmed comparisons whose read skill
  holds at least one sentence of it (categories by ``mkbsim.claims``), and the difference in points;
- follow: the shares of follow levels, per model × direction (from a labeler's stored labels);
- propagation: per model × direction, the share of the read skill's unverified claims
  (``mkbsim.claims.UNVERIFIED``) that reappear in the attempt's own skill (claims linked by similarity);
- failures: the shares of failure classes among harmed comparisons with a target-side failure;
- correlation: Spearman's rank correlation, across model × family cells, of the full-follow share with
  the paired lift.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from mkbsim.claims import CATEGORIES, Linker, extract_claims, is_unverified
from mkbsim.lab import Labels, Material, SkillComparison
from mkbsim.metrics import paired_lift
from mkbsim.skills._label import FAILURE_CLASSES, FOLLOW_LEVELS
from mkbsim.skills._tables import number, render, share, signed


def skills_report(
    comparisons: Sequence[SkillComparison], material: Material, labels: Labels | None, labeler: str, link: Linker
) -> dict[str, Any]:
    """The report's sections over resolved plain comparisons (``lab.transfer.skill_comparisons``)."""
    read = {a: t.skill for a, t in material.treatments.items()}
    categories = {a: {c.category for c in extract_claims(text)} for a, text in read.items()}
    labels = labels or Labels()
    return {
        "labeler": labeler,
        "similarity": link.note,
        "prevalence": _prevalence(comparisons, categories),
        "follow": _follow(comparisons, labels),
        "propagation": _propagation(comparisons, read, material.skills, link),
        "failures": _failures(comparisons, labels),
        "correlation": _correlation(comparisons, labels),
    }


def _prevalence(rows: Sequence[SkillComparison], categories: dict[str, set[str]]) -> list[dict[str, Any]]:
    helped = [categories.get(r.treatment_attempt_id, set()) for r in rows if r.outcome == "helped"]
    harmed = [categories.get(r.treatment_attempt_id, set()) for r in rows if r.outcome == "harmed"]
    out = []
    for category in CATEGORIES:
        a = sum(category in c for c in helped) / len(helped) if helped else None
        b = sum(category in c for c in harmed) / len(harmed) if harmed else None
        out.append({"category": category, "helped": a, "harmed": b, "helped_n": len(helped),
                    "harmed_n": len(harmed), "points": None if a is None or b is None else 100 * (b - a)})  # fmt: skip
    return out


def _cells(rows: Sequence[SkillComparison], *fields: str) -> dict[tuple[str, ...], list[SkillComparison]]:
    cells: dict[tuple[str, ...], list[SkillComparison]] = {}
    for r in rows:
        cells.setdefault(tuple(getattr(r, f) for f in fields), []).append(r)
    return dict(sorted(cells.items()))


def _follow(rows: Sequence[SkillComparison], labels: Labels) -> list[dict[str, Any]]:
    out = []
    for (model, direction), cell in _cells(rows, "model", "direction").items():
        levels = [labels.follow[r.treatment_attempt_id] for r in cell if r.treatment_attempt_id in labels.follow]
        out.append({"model": model, "direction": direction, "n": len(levels),
                    **{lvl: levels.count(lvl) / len(levels) if levels else None for lvl in FOLLOW_LEVELS}})  # fmt: skip
    return out


def _propagation(
    rows: Sequence[SkillComparison], read: dict[str, str], written: dict[str, str], link: Linker
) -> list[dict[str, Any]]:
    link.warm([c.text for text in (*read.values(), *written.values()) for c in extract_claims(text)])
    out = []
    for (model, direction), cell in _cells(rows, "model", "direction").items():
        unverified = reappeared = claims = carried = 0
        for r in cell:
            source = [c.text for c in extract_claims(read.get(r.treatment_attempt_id, ""))]
            own = [c.text for c in extract_claims(written.get(r.treatment_attempt_id, ""))]
            linked = {x.source for x in link.link(source, own)}
            flags = [is_unverified(s) for s in source]
            claims += len(source)
            carried += len(linked)
            unverified += sum(flags)
            reappeared += sum(1 for i, f in enumerate(flags) if f and i in linked)
        out.append({"model": model, "direction": direction, "n": len(cell), "claims": claims,
                    "carried": carried / claims if claims else None, "unverified": unverified,
                    "unverified_propagated": reappeared / unverified if unverified else None})  # fmt: skip
    return out


def _failures(rows: Sequence[SkillComparison], labels: Labels) -> dict[str, Any]:
    harmed = [r.treatment_attempt_id for r in rows if r.outcome == "harmed" and not r.treatment_passed]
    classes = [labels.failure[a] for a in harmed if a in labels.failure]
    return {"harmed_target_failures": len(harmed), "labeled": len(classes),
            "shares": {c: classes.count(c) / len(classes) if classes else None for c in FAILURE_CLASSES}}  # fmt: skip


def _correlation(rows: Sequence[SkillComparison], labels: Labels) -> dict[str, Any]:
    points: list[dict[str, Any]] = []
    for (model, family), cell in _cells(rows, "model", "family").items():
        levels = [labels.follow[r.treatment_attempt_id] for r in cell if r.treatment_attempt_id in labels.follow]
        if levels:
            full, lift = levels.count("full") / len(levels), paired_lift([r.r for r in cell])
            points.append({"model": model, "family": family, "n": len(cell), "full_share": full, "lift": lift})
    rho = spearman([p["full_share"] for p in points], [p["lift"] for p in points])
    return {"cells": len(points), "spearman_rho": rho, "points": points}


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho (Pearson correlation of average ranks); None with < 3 points or a constant side."""
    if len(x) != len(y):
        raise ValueError("x and y differ in length")
    if len(x) < 3:
        return None
    rx, ry = _ranks(x), _ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sxx, syy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else None


def render_skills(report: dict[str, Any]) -> str:
    parts = [f"skills report (labels: {report['labeler']}; claims linked by {report['similarity']})\n"]
    rows: list[tuple[str, ...]] = [
        (r["category"], share(r["helped"]), share(r["harmed"]), "–" if r["points"] is None else f"{r['points']:+.1f}")
        for r in report["prevalence"]
    ]
    n = report["prevalence"][0]
    parts.append(render(f"\ncategory prevalence in read skills: helped (n {n['helped_n']}) vs harmed "
                        f"(n {n['harmed_n']}), points = harmed − helped",
                        ("category", "helped", "harmed", "points"), rows))  # fmt: skip
    rows = [(r["model"], r["direction"], str(r["n"]), *(share(r[lvl]) for lvl in FOLLOW_LEVELS))
            for r in report["follow"]]  # fmt: skip
    parts.append(render("\nfollow levels", ("model", "direction", "n", *FOLLOW_LEVELS), rows))
    rows = [(r["model"], r["direction"], str(r["claims"]), share(r["carried"]), str(r["unverified"]),
             share(r["unverified_propagated"])) for r in report["propagation"]]  # fmt: skip
    headers = ("model", "direction", "claims", "carried", "unverified", "unverified propagated")
    parts.append(render("\nclaim propagation: read skill → the attempt's own skill", headers, rows))
    f = report["failures"]
    rows = [(c, share(v)) for c, v in f["shares"].items()]
    title = (f"\nfailure classes of harmed comparisons with a target-side failure "
             f"(labeled {f['labeled']} of {f['harmed_target_failures']})")  # fmt: skip
    parts.append(render(title, ("class", "share"), rows))
    c = report["correlation"]
    rows = [(p["model"], p["family"], str(p["n"]), share(p["full_share"]), signed(p["lift"])) for p in c["points"]]
    title = (f"\nfull-follow share vs paired lift across model × family cells: Spearman rho "
             f"{number(c['spearman_rho'])} over {c['cells']} cells")  # fmt: skip
    parts.append(render(title, ("model", "family", "n", "full", "lift"), rows))
    return "".join(parts)
