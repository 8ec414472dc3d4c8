"""Simulator vs H200: the analytic runtime of each measured reference solution's plan, against the measurement.

Every row of benchmarks/h200_measurements.json (a solution under problems/*/solutions/, timed end to end
through `mkbsim verify --backend cuda`) is matched to its simulator plan kind by the `[solution_plans]`
table of mkbsim/simulator/design.toml and costed on the h200 profile at full implementation quality
(the reference solutions are tuned by hand); each problem's eager reference is compared as well.
Prints a markdown table and the geometric-mean predicted/measured ratio per category
(fused = one kernel for everything, partial = eager PyTorch plus one DSL kernel, eager = the reference).

    .venv/bin/python benchmarks/sim_vs_measured.py
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mkbsim.simulator import all_design_spaces, solution_plan

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).with_name("h200_measurements.json")
PARTIAL_KINDS = ("minimal_dsl", "split_dominant")  # plans that leave part of the work to eager PyTorch
CATEGORIES = ("fused", "partial", "eager")
QUALITY = 1.0


@dataclass(frozen=True)
class Comparison:
    label: str
    category: str
    predicted_ms: float
    measured_ms: float

    @property
    def ratio(self) -> float:
        return self.predicted_ms / self.measured_ms


def solution_files() -> list[Path]:
    # NN_<plan>_<dsl>.py; the `_<helper>.py` modules beside them are shared kernel code, not solutions
    return sorted(ROOT.glob("problems/*/solutions/[0-9]*_*.py"))


def load_measurements() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text())
    return data


def comparisons(data: dict[str, Any]) -> list[Comparison]:
    spaces = all_design_spaces("h200")
    files = {p.name: p for p in solution_files()}
    out: list[Comparison] = []
    eager: dict[str, list[float]] = {}
    for row in data["rows"]:
        problem, dsl, kind = solution_plan(files[row["file"]])
        if (problem, dsl) != (row["problem"], row["dsl"]):
            raise ValueError(f"{row['file']}: the row says {row['problem']} {row['dsl']}")
        category = "partial" if kind in PARTIAL_KINDS else "fused"
        predicted = spaces[problem].plan(kind).runtime_ms(dsl, QUALITY)
        out.append(Comparison(f"{problem} {dsl} `{row['plan']}` → {kind}", category, predicted, row["verifier_ms"]))
        eager.setdefault(problem, []).append(row["eager_ms"])
    for problem, measured in eager.items():
        # the reference was timed next to each solution of the problem: their geometric mean
        out.append(Comparison(f"{problem} eager reference", "eager", spaces[problem].eager_ms, _geomean(measured)))
    return out


def geomean_ratios(rows: list[Comparison]) -> dict[str, float]:
    return {c: _geomean([r.ratio for r in rows if r.category == c]) for c in CATEGORIES}


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main() -> None:
    data = load_measurements()
    rows = comparisons(data)
    print(f"H200 {data['date']}, driver {data['driver']}; predicted at quality {QUALITY}\n")
    print("| solution → plan kind | category | predicted ms | measured ms | predicted / measured |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.label} | {r.category} | {r.predicted_ms:.4f} | {r.measured_ms:.4f} | {r.ratio:.2f} |")
    print()
    for category, ratio in geomean_ratios(rows).items():
        print(f"- geometric-mean ratio, {category}: {ratio:.2f}")
    worst = max(rows, key=lambda r: abs(math.log(r.ratio)))
    print(f"- furthest row: {worst.label}, {worst.ratio:.2f}")


if __name__ == "__main__":
    main()
