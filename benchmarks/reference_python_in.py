"""How much of each problem's answer its reference brings in from Python, as the verifier counts it.

The values the eager code brings into tensors from Python (lifts, fills, numbers taken by operators, views and reads
at places Python chose: ``_eagerwork.crossing``) count against 25% of the answer's bytes (``PYTHON_SHARE``). A
reference is eager code written as a problem's spec, not to encode anything: its share is the floor an honest plan
of eager glue meets. Prints the largest shares at SMOKE (seed 1), with how many operator calls a ``SCALARS`` or
``PLACES`` mark priced.

    python benchmarks/reference_python_in.py [--top N]
"""

from __future__ import annotations

import argparse
import sys

import torch

from mkbsim.catalog import load_problem, problems_root
from mkbsim.verifier import _eagerwork


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=12, help="rows to print, largest share first")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for path in sorted(problems_root().glob("*/[0-9][0-9]_*.py")):
        problem = load_problem(path)
        try:
            inputs = list(problem.make_inputs(problem.smoke, seed=1))
            inplace = [list(problem.inputs).index(name) for name in problem.inplace]
            cost = problem.input_cost(problem.smoke, inputs)
            reference = _eagerwork.reference_work(problem.reference, inputs, cost.total_flops, inplace,
                                                  cost.floor_flops)  # fmt: skip
            ops = _eagerwork.reference_ops(problem.reference, inputs)
        except Exception as exc:  # a row per problem, whatever breaks
            print(f"{path.stem}: {type(exc).__name__}: {str(exc)[:100]}", file=sys.stderr)
            continue
        marked = sum(count for (name, _, _), count in ops if _eagerwork.SCALARS in name or _eagerwork.PLACES in name)
        brought = _eagerwork.work_of(ops).from_python
        answer = reference.informative[1]
        rows.append((brought / max(answer, 1), path.stem, brought, answer, marked))
    print(f"{'problem':64s} {'in':>7s} {'bytes':>6s} {'answer':>7s} {'marked':>6s}")
    for share, stem, brought, answer, marked in sorted(rows, reverse=True)[: args.top]:
        print(f"{stem:64s} {share:7.4f} {brought:6d} {answer:7d} {marked:6d}")


if __name__ == "__main__":
    main()
