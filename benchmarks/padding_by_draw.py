"""The padding the eager-work rule takes out of a reference (verifier README, "Eager work"): its recorded products over
the problem's useful FLOPs, nominal (``cost(workload)``) and the draw's own (``input_cost(workload, inputs)``), draw
by draw, at SMOKE. A reference that pads nothing has the same ratio on every draw by its own count; a nominal count
of work that depends on the inputs' values (sequence lengths, a routing's local pairs) moves with the draw.

    python benchmarks/padding_by_draw.py [--problems SPEC] [--seeds N]
    python benchmarks/padding_by_draw.py --case FILE --problem pNN [--runs N]

The second form verifies a submission ``--runs`` times on the cpu backend and prints the eager-work measures of each
run's checked draw (``details.eager_work``: its passes share, whether the eager code covers the problem, the verdict).
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

import torch


def _ratios(problem, seeds: int) -> tuple[list[float], list[float]]:
    from mkbsim.verifier import _eagerwork

    nominal, own = [], []
    inplace = [i for i, name in enumerate(problem.inputs) if name in problem.inplace]
    for seed in range(seeds):
        inputs = problem.make_inputs(problem.smoke, seed=seed)
        products = _eagerwork.reference_work(problem.reference, inputs, 0.0, inplace).amounts["matmul"]
        nominal.append(products / problem.cost(problem.smoke).total_flops)
        own.append(products / problem.input_cost(problem.smoke, inputs).total_flops)
    return nominal, own


def audit(spec: str | None, seeds: int) -> None:
    from rich.console import Console
    from rich.table import Table

    from mkbsim.catalog import load_catalog

    table = Table("problem", "input_cost", "products / cost()", "products / input_cost()", "spread (cost, own)")
    for problem in load_catalog().select(spec):
        nominal, own = _ratios(problem, seeds)
        if max(nominal) == 0:
            continue  # no products: the rule takes no padding out

        def spread(values: list[float]) -> str:
            return f"{max(values) / min(values) - 1:.1%}"

        table.add_row(
            problem.id,
            "yes" if hasattr(problem.module, "input_cost") else "-",
            " ".join(f"{r:.3f}" for r in nominal),
            " ".join(f"{r:.3f}" for r in own),
            f"{spread(nominal)}, {spread(own)}",
        )
    Console().print(table)


def verify_runs(case: Path, problem: str, runs: int) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from mkbsim.verifier import VerifierSession

    shares = []
    with VerifierSession("cpu") as session:
        for run in range(runs):
            report = session.verify(case, problem, "tirx")
            found = report.details.get("eager_work", {})
            shares.append(found.get("passes", float("nan")))
            print(f"run {run}: draw {found.get('draw')} passes {shares[-1]:.3f} covers {found.get('covers')} "
                  f"verdict {report.failure or 'passed'}", flush=True)  # fmt: skip
    print(f"passes share: min {min(shares):.3f} median {statistics.median(shares):.3f} max {max(shares):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", help="a catalog selection (default: every problem with products)")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--case", type=Path, help="a submission to verify --runs times")
    parser.add_argument("--problem", help="the problem the --case submission solves")
    parser.add_argument("--runs", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.case is not None:
        verify_runs(args.case, args.problem, args.runs)
    else:
        audit(args.problems, args.seeds)


if __name__ == "__main__":
    main()
