"""`mkbsim label`'s tables: labeler quality per label and agreement between labelers."""

from __future__ import annotations

from typing import Any

from mkbsim.skills._tables import number, render, share


def render_label_report(result: dict[str, Any], *, has_truth: bool) -> str:
    counts = result["labeled"]
    parts = [f"{result['labeler']}: labeled {counts['skills']} skills, {counts['follow']} follow levels, "
             f"{counts['failure']} failure classes\n"]  # fmt: skip
    if not has_truth:
        parts.append("no ground-truth labels in these campaigns (only simulated campaigns have them)\n")
    rows: list[tuple[str, ...]]
    for name, aspects in result["quality"].items():
        for aspect, q in aspects.items():
            rows = [(label, share(v["precision"]), share(v["recall"]), str(v["support"]), str(v["predicted"]))
                    for label, v in q["labels"].items()]  # fmt: skip
            title = f"\n{name} vs ground truth — {aspect}: n {q['n']}, accuracy {share(q['accuracy'])}"
            parts.append(render(title, ("label", "precision", "recall", "true", "predicted"), rows))
    rows = [(f"{k['a']} / {k['b']}", number(k["categories"]), str(k["categories_n"]), number(k["follow"]),
             str(k["follow_n"]), number(k["failure"]), str(k["failure_n"])) for k in result["kappa"]]  # fmt: skip
    headers = ("labelers", "κ categories", "n", "κ follow", "n", "κ failure", "n")
    parts.append(render("\nCohen's kappa between labelers", headers, rows))
    return "".join(parts)
