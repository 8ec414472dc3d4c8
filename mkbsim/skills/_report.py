"""`mkbsim report --section skills`: what skills contain and how they are used (DESIGN §7), over
plain-protocol comparisons, per group of ``--by`` (model by default; an "all" group pools them), with
every label from ONE labeler (``--labeler``): stored labels, or for ``heuristic`` without stored
labels the heuristic labeler run in memory.

- prevalence: per group × rubric category, the share of helped and of harmed comparisons whose read
  skill (the source's written skill) holds a sentence of it, and the difference harmed − helped;
- follow: follow-level shares among helped and harmed comparisons, and the full-follow gap;
- propagation: among comparisons whose read skill holds unverified claims (the labeler's categories in
  ``mkbsim.claims.UNVERIFIED``), the share where one reappears in the attempt's own skill (claims linked
  by similarity), harmed vs helped;
- failures: every harmed comparison has a target-side failure (DESIGN §7): a break, or a runtime-only
  harm. Class shares among assigned causes, the skill-side share (search truncation + unverified
  adoption), and the largest cause with its share of assigned causes and of all the group's comparisons
  (the study quotes the latter). A runtime-only harm with no skill-side mechanism has no cause
  ("unassigned");
- correlation: Spearman's rho of full-follow share vs paired lift across model × family cells (fixed
  cells, as in the study).
Intervals: cluster bootstrap over problems (``mkbsim.metrics._clusters``); differences carry a p read
off the same resamples (``bootstrap_p``), Holm/BH adjusted across each table.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from mkbsim.claims import CATEGORIES, UNVERIFIED, Linker, claims_of, segment
from mkbsim.lab import Labels, Material, SkillComparison
from mkbsim.metrics import paired_lift
from mkbsim.metrics._clusters import ClusterBootstrap, add_adjusted, bootstrap_p, percentile_interval, ratio_of_sums
from mkbsim.skills._label import FAILURE_CLASSES, FOLLOW_LEVELS, HeuristicLabeler
from mkbsim.skills._tables import interval, number, points, pvalue, render, share, signed

ALL = "all"
SKILL_SIDE = ("search_truncation", "unverified_adoption")
#: the dimensions the skills tables can be grouped by
SKILL_DIMENSIONS = ("model", "direction", "family")
RHO_RESAMPLES = 1000
Row = dict[str, Any]


def skills_report(
    comparisons: Sequence[SkillComparison],
    material: Material,
    labels: Labels | None,
    labeler: str,
    link: Linker,
    by: Sequence[str] = ("model",),
) -> dict[str, Any]:
    """Every table over resolved plain comparisons (``lab.transfer.skill_comparisons``), with ``labels``
    (None: the heuristic labeler, run here)."""
    unknown = [d for d in by if d not in SKILL_DIMENSIONS]
    if unknown:
        raise ValueError(f"the skills section groups by {','.join(SKILL_DIMENSIONS)}, not {','.join(unknown)}")
    labels = labels if labels is not None else heuristic_labels(material)
    read = _read_sentences(labels)
    groups = _groups(comparisons, by)
    return {
        "labeler": labeler,
        "by": list(by),
        "similarity": link.note,
        "prevalence": _prevalence(groups, read),
        "follow": _follow(groups, labels),
        "follow_gap": _follow_gap(groups, labels),
        "propagation": _propagation(groups, read, material, link),
        "failures": _failures(groups, labels),
        "correlation": _correlation(comparisons, labels),
    }


def heuristic_labels(material: Material) -> Labels:
    """The heuristic labeler's labels of ``material``, computed in memory (what ``mkbsim label`` would store)."""
    labeler = HeuristicLabeler()
    out = Labels()
    for attempt, text in material.skills.items():
        sentences = [c.text for c in claims_of(text)]
        out.sentences.update(((attempt, s), c) for s, c in zip(sentences, labeler.categories(sentences), strict=True))
    harmed = set(material.harmed_failures)
    for attempt, t in material.treatments.items():
        if (level := labeler.follow(t)) is not None:
            out.follow[attempt] = level
        if attempt in harmed and (cause := labeler.failure(t)) is not None:
            out.failure[attempt] = cause
    return out


def _read_sentences(labels: Labels) -> dict[str, list[tuple[str, str]]]:
    """The labeled sentences of each written skill: attempt → [(text, category)]."""
    out: dict[str, list[tuple[str, str]]] = {}
    for (attempt, text), category in labels.sentences.items():
        out.setdefault(attempt, []).append((text, category))
    return out


def _groups(rows: Sequence[SkillComparison], by: Sequence[str]) -> list[tuple[Row, list[SkillComparison]]]:
    """("all" pooled first, then each value of ``by``) → its comparisons; keys name every dimension."""
    cells: dict[tuple[str, ...], list[SkillComparison]] = {(ALL,) * len(by): list(rows)} if by else {(): list(rows)}
    for r in rows:
        cells.setdefault(tuple(getattr(r, d) for d in by), []).append(r)
    return [(dict(zip(by, key, strict=True)), cell) for key, cell in sorted(
        cells.items(), key=lambda kv: tuple((v != ALL, v) for v in kv[0]))]  # fmt: skip


def _seed(*parts: object) -> int:
    return zlib.crc32("\x1f".join(map(str, parts)).encode())


def _two_shares(
    cell: Sequence[SkillComparison], first: Sequence[bool], second: Sequence[bool], marked: Sequence[bool], seed: int
) -> Row:
    """Share of ``marked`` among ``first`` and among ``second`` (e.g. helped, harmed), their difference
    second − first in points, with intervals from the same problem resamples and a bootstrap p."""
    n1, n2 = sum(first), sum(second)
    s1 = sum(m and f for m, f in zip(marked, first, strict=True)) / n1 if n1 else None
    s2 = sum(m and f for m, f in zip(marked, second, strict=True)) / n2 if n2 else None
    row: Row = {"first_n": n1, "first": s1, "second_n": n2, "second": s2,
                "points": None if s1 is None or s2 is None else 100 * (s2 - s1)}  # fmt: skip
    if not n1 or not n2:
        return row | {"first_ci": None, "second_ci": None, "points_ci": None, "p": None}
    boot = ClusterBootstrap([c.problem for c in cell], seed=seed)
    a = boot.replicates(ratio_of_sums, [m and f for m, f in zip(marked, first, strict=True)], first)
    b = boot.replicates(ratio_of_sums, [m and f for m, f in zip(marked, second, strict=True)], second)
    diff = 100 * (b - a)
    return row | {"first_ci": percentile_interval(a), "second_ci": percentile_interval(b),
                  "points_ci": percentile_interval(diff), "p": bootstrap_p(diff)}  # fmt: skip


def _outcomes(cell: Sequence[SkillComparison]) -> tuple[list[bool], list[bool]]:
    return [c.outcome == "helped" for c in cell], [c.outcome == "harmed" for c in cell]


def _named(row: Row, first: str, second: str) -> Row:
    """``_two_shares`` keys renamed to the two sides' names (e.g. helped, harmed)."""
    rename = {"first": first, "second": second}
    out: Row = {}
    for key, value in row.items():
        head, _, tail = key.partition("_")
        out[rename[head] + ("_" + tail if tail else "") if head in rename else key] = value
    return out


Groups = list[tuple[Row, list[SkillComparison]]]


def _prevalence(groups: Groups, read: Mapping[str, list[tuple[str, str]]]) -> list[Row]:
    rows = []
    for key, cell in groups:
        labeled = [c for c in cell if c.source_attempt_id in read and c.outcome != "neutral"]
        helped, harmed = _outcomes(labeled)
        held = [{category for _, category in read[c.source_attempt_id or ""]} for c in labeled]
        for category in CATEGORIES:
            marked = [category in h for h in held]
            stats = _two_shares(labeled, helped, harmed, marked, _seed(*key.values(), category))
            rows.append(key | {"category": category} | _named(stats, "helped", "harmed"))
    add_adjusted(rows)
    return rows


def _follow(groups: Groups, labels: Labels) -> list[Row]:
    rows = []
    for key, cell in groups:
        for outcome in ("helped", "harmed", ALL):
            sub = [c for c in cell if c.treatment_attempt_id in labels.follow and outcome in (ALL, c.outcome)]
            row: Row = key | {"outcome": outcome, "n": len(sub)}
            boot = ClusterBootstrap([c.problem for c in sub], seed=_seed(*key.values(), outcome)) if sub else None
            for level in FOLLOW_LEVELS:
                at = [labels.follow[c.treatment_attempt_id] == level for c in sub]
                row[level] = sum(at) / len(sub) if sub else None
                row[f"{level}_ci"] = boot.interval(ratio_of_sums, at, [1.0] * len(sub)) if boot else None
            rows.append(row)
    return rows


def _follow_gap(groups: Groups, labels: Labels) -> list[Row]:
    """Full-follow share, harmed − helped, in points."""
    rows = []
    for key, cell in groups:
        sub = [c for c in cell if c.treatment_attempt_id in labels.follow]
        helped, harmed = _outcomes(sub)
        full = [labels.follow[c.treatment_attempt_id] == "full" for c in sub]
        stats = _two_shares(sub, helped, harmed, full, _seed(*key.values(), "follow"))
        rows.append(key | _named(stats, "full_helped", "full_harmed"))
    add_adjusted(rows)
    return rows


def _propagation(
    groups: Groups,
    read: Mapping[str, list[tuple[str, str]]],
    material: Material,
    link: Linker,
) -> list[Row]:
    read_unverified: list[tuple[str, list[str]]] = []  # treatment → the unverified claims it read
    for _, cell in groups[:1]:  # the pooled group holds every comparison
        for c in cell:
            unverified = [t for t, category in read.get(c.source_attempt_id or "", []) if category in UNVERIFIED]
            if unverified:
                read_unverified.append((c.treatment_attempt_id, unverified))
    # the claims of those treatments' own skills: their sentences only (segmented, not classified again)
    own = {a: [s.text for s in segment(material.skills[a])] for a, _ in read_unverified if a in material.skills}
    link.warm([s for texts in own.values() for s in texts] + [t for _, ts in read_unverified for t in ts])
    carried: dict[str, tuple[int, int]] = {}  # treatment → (unverified claims read, of them reappearing)
    for treatment, unverified in read_unverified:
        linked = {x.source for x in link.link(unverified, own.get(treatment, []))}
        carried[treatment] = (len(unverified), len(linked))
    rows = []
    for key, cell in groups:
        sub = [c for c in cell if c.treatment_attempt_id in carried]
        helped, harmed = _outcomes(sub)
        reappeared = [carried[c.treatment_attempt_id][1] > 0 for c in sub]
        stats = _two_shares(sub, helped, harmed, reappeared, _seed(*key.values(), "propagation"))
        claims = sum(carried[c.treatment_attempt_id][0] for c in sub)
        kept = sum(carried[c.treatment_attempt_id][1] for c in sub)
        rows.append(key | _named(stats, "helped", "harmed") | {
            "with_unverified": len(sub), "unverified_claims": claims,
            "unverified_claims_propagated": kept / claims if claims else None,
        })  # fmt: skip
    add_adjusted(rows)
    return rows


def _failures(groups: Groups, labels: Labels) -> list[Row]:
    rows = []
    for key, cell in groups:
        harmed = [c for c in cell if c.outcome == "harmed"]
        assigned = [c for c in harmed if c.treatment_attempt_id in labels.failure]
        causes = [labels.failure[c.treatment_attempt_id] for c in assigned]
        row: Row = key | {
            "comparisons": len(cell), "harmed": len(harmed),
            "breaks": sum(1 for c in harmed if c.verdict_change == "break"),
            "runtime_only": sum(1 for c in harmed if c.verdict_change != "break"),
            "assigned": len(assigned), "unassigned": len(harmed) - len(assigned),
        }  # fmt: skip
        boot = (
            ClusterBootstrap([c.problem for c in assigned], seed=_seed(*key.values(), "failures")) if assigned else None
        )
        row["shares"] = {}
        for cause in FAILURE_CLASSES:
            value, ci = _share_of(boot, [x == cause for x in causes])
            row["shares"][cause] = {"share": value, "share_ci": ci, "count": causes.count(cause)}
        row["skill_side"], row["skill_side_ci"] = _share_of(boot, [x in SKILL_SIDE for x in causes])
        largest = max(FAILURE_CLASSES, key=causes.count) if causes else None
        row["largest"] = largest
        row["largest_share"] = causes.count(largest) / len(causes) if largest else None
        row["largest_of_comparisons"] = causes.count(largest) / len(cell) if largest else None
        rows.append(row)
    return rows


def _share_of(boot: ClusterBootstrap | None, marked: Sequence[bool]) -> tuple[float | None, list[float] | None]:
    if boot is None:
        return None, None
    return sum(marked) / len(marked), boot.interval(ratio_of_sums, marked, [1.0] * len(marked))


def _correlation(rows: Sequence[SkillComparison], labels: Labels) -> Row:
    """Spearman's rho across model × family cells with a bootstrap interval over problems (each resample
    recomputes every cell's full-follow share and lift, then rho)."""
    cells: dict[tuple[str, str], list[SkillComparison]] = {}
    for r in rows:
        cells.setdefault((r.model, r.family), []).append(r)
    points: list[Row] = []
    kept: list[list[SkillComparison]] = []
    for (model, family), cell in sorted(cells.items()):
        levels = [labels.follow[r.treatment_attempt_id] for r in cell if r.treatment_attempt_id in labels.follow]
        if levels:
            points.append({"model": model, "family": family, "n": len(cell), "full_share":
                           levels.count("full") / len(levels), "lift": paired_lift([r.r for r in cell])})  # fmt: skip
            kept.append(cell)
    rho = spearman([p["full_share"] for p in points], [p["lift"] for p in points])
    ci = _rho_interval(kept, labels) if rho is not None else None
    return {"cells": len(points), "spearman_rho": rho, "spearman_rho_ci": ci, "points": points}


def _rho_interval(cells: list[list[SkillComparison]], labels: Labels) -> list[float] | None:
    flat = [(i, r) for i, cell in enumerate(cells) for r in cell]
    boot = ClusterBootstrap([r.problem for _, r in flat], resamples=RHO_RESAMPLES, seed=_seed("rho"))

    def per_cell(values: Callable[[SkillComparison], float]) -> np.ndarray:
        """(resamples, cells): each cell's resampled total of ``values``."""
        out = np.zeros((RHO_RESAMPLES, len(cells)))
        for i in range(len(cells)):
            out[:, i] = boot.counts @ boot.sums([values(r) if j == i else 0.0 for j, r in flat])
        return out

    def follow_is(level: str | None) -> Callable[[SkillComparison], float]:
        return lambda r: float(
            r.treatment_attempt_id in labels.follow and level in (None, labels.follow[r.treatment_attempt_id])
        )

    full, labeled = per_cell(follow_is("full")), per_cell(follow_is(None))
    logs, n = per_cell(lambda r: math.log(r.r)), per_cell(lambda r: 1.0)
    values = []
    for b in range(RHO_RESAMPLES):
        present = labeled[b] > 0
        rho = spearman(list(full[b, present] / labeled[b, present]), list(np.expm1(logs[b, present] / n[b, present])))
        values.append(np.nan if rho is None else rho)
    return percentile_interval(np.asarray(values))


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


# -- rendering -----------------------------------------------------------------------------------


def _key_cells(row: Row, by: Sequence[str]) -> tuple[str, ...]:
    return tuple(str(row[d]) for d in by)


def render_skills(report: dict[str, Any]) -> str:
    by = list(report["by"])
    parts = [f"skills report (labels: {report['labeler']} in every table; claims linked by {report['similarity']};"
             f" groups: {', '.join(by) or 'all pooled'})\n"
             "intervals: 95% cluster bootstrap over problems; pts = harmed − helped, percentage points;"
             " pHolm across the table\n"]  # fmt: skip
    rows = [(*_key_cells(r, by), r["category"], f"{share(r['helped'])} ({r['helped_n']})",
             f"{share(r['harmed'])} ({r['harmed_n']})", points(r["points"]), interval(r["points_ci"]),
             pvalue(r["p_holm"])) for r in report["prevalence"]]  # fmt: skip
    parts.append(render("\ncategory prevalence in read skills, helped (n) vs harmed (n)",
                        (*by, "category", "helped", "harmed", "pts", "95% CI", "pHolm"), rows))  # fmt: skip
    rows = [(*_key_cells(r, by), r["outcome"], str(r["n"]), *(share(r[lvl]) for lvl in FOLLOW_LEVELS),
             interval(r["full_ci"], percent=True)) for r in report["follow"]]  # fmt: skip
    parts.append(render("\nfollow levels by outcome", (*by, "outcome", "n", *FOLLOW_LEVELS, "full 95% CI"), rows))
    rows = [(*_key_cells(r, by), share(r["full_helped"]), share(r["full_harmed"]), points(r["points"]),
             interval(r["points_ci"]), pvalue(r["p_holm"])) for r in report["follow_gap"]]  # fmt: skip
    parts.append(render("\nfull follow, helped vs harmed",
                        (*by, "helped", "harmed", "pts", "95% CI", "pHolm"), rows))  # fmt: skip
    rows = [(*_key_cells(r, by), f"{share(r['harmed'])} ({r['harmed_n']})", f"{share(r['helped'])} ({r['helped_n']})",
             points(r["points"]), interval(r["points_ci"]), pvalue(r["p_holm"]),
             share(r["unverified_claims_propagated"])) for r in report["propagation"]]  # fmt: skip
    parts.append(render("\nclaim propagation: comparisons whose read skill's unverified claims reappear in the "
                        "attempt's own skill,\nharmed (n) vs helped (n); claims: share of unverified claims carried",
                        (*by, "harmed", "helped", "pts", "95% CI", "pHolm", "claims"), rows))  # fmt: skip
    rows = []
    for r in report["failures"]:
        rows.append((*_key_cells(r, by), str(r["harmed"]), str(r["breaks"]), str(r["assigned"]),
                     share(r["skill_side"]), interval(r["skill_side_ci"], percent=True), r["largest"] or "–",
                     share(r["largest_share"]), share(r["largest_of_comparisons"])))  # fmt: skip
    parts.append(render("\nfailure classes of harmed comparisons (every harm is a target-side failure: a break, or "
                        "a runtime-only\nharm, which gets a skill-side cause or none); skill = search truncation + "
                        "unverified adoption\namong assigned causes; largest: its share of assigned / of all "
                        "comparisons", (*by, "harmed", "breaks", "assigned", "skill", "95% CI", "largest", "of asg",
                                        "of all"), rows))  # fmt: skip
    rows = [(*_key_cells(r, by), cause, str(v["count"]), share(v["share"]), interval(v["share_ci"], percent=True))
            for r in report["failures"] for cause, v in r["shares"].items()]  # fmt: skip
    parts.append(render("\nfailure class shares among assigned causes", (*by, "class", "n", "share", "95% CI"), rows))
    c = report["correlation"]
    rows = [(p["model"], p["family"], str(p["n"]), share(p["full_share"]), signed(p["lift"])) for p in c["points"]]
    title = (f"\nfull-follow share vs paired lift across model × family cells: Spearman rho "
             f"{number(c['spearman_rho'])} {interval(c['spearman_rho_ci'], digits=2)} over {c['cells']} "
             "cells")  # fmt: skip
    parts.append(render(title, ("model", "family", "n", "full", "lift"), rows))
    return "".join(parts)
