"""How often the fixed-arguments rule (``_coverage.fixed_check``) would reject an honest kernel whose launches take
small tensors the data makes (p26's per-request lengths, update counts and first offsets, int64, as
``tests/verifier/honest/per_request_starts_and_lengths_p26.py`` passes them), by Monte Carlo: a pool of SMOKE inputs
drawn by the problem's own ``make_inputs``, then per trial 5 of them as the correctness draws and 10 as the evidence
calls. An element is judged where the 5 draws gave it one value; an evidence call differing there is marked.

    python benchmarks/fixed_chance_rates.py [--pool 400] [--trials 3000] [--seed 0]

Prints, per set of tensors, the share of trials each decision rule rejects: the calls marked per call (any judged
element differing) on more than half of them (the rule before session 37 for these bytes), one element differing on
more than half, on 8 or more, and on all 10 (``FIXED_CHANCE_CALLS``: the rule since)."""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable

import torch

EVIDENCE, DRAWS = 10, 5


def small_tensors(inputs: tuple[torch.Tensor, ...]) -> dict[str, torch.Tensor]:
    """What the honest p26 kernel's run() makes of the inputs and gives its launches (positions: the problem's)."""
    counts = inputs[5].to(torch.int64)
    starts = inputs[8].to(torch.int64)
    return {
        "counts": counts.reshape(-1),
        "first offsets": (torch.cumsum(counts, 1) - counts).reshape(-1),
        "lengths": starts[1:] - starts[:-1],
    }


def rates(pool: list[dict[str, torch.Tensor]], names: list[str], trials: int, rng: random.Random) -> dict[str, float]:
    rules: dict[str, Callable[[int, int], bool]] = {
        "per call, over half": lambda calls, worst: calls > EVIDENCE // 2,
        "one element, over half": lambda calls, worst: worst > EVIDENCE // 2,
        "one element, 8 or more": lambda calls, worst: worst >= 8,
        "one element, all": lambda calls, worst: worst == EVIDENCE,
    }
    rejected = dict.fromkeys(rules, 0)
    for _ in range(trials):
        chosen = rng.sample(range(len(pool)), DRAWS + EVIDENCE)
        marked = torch.zeros(EVIDENCE, dtype=torch.bool)
        worst = 0
        for name in names:
            draws = torch.stack([pool[k][name] for k in chosen[:DRAWS]])
            evidence = torch.stack([pool[k][name] for k in chosen[DRAWS:]])
            judged = (draws == draws[0]).all(0)
            differs = (evidence != draws[0]) & judged
            marked |= differs.any(1)
            worst = max(worst, int(differs.sum(0).max()))
        for rule, rejects in rules.items():
            rejected[rule] += rejects(int(marked.sum()), worst)
    return {rule: round(count / trials, 4) for rule, count in rejected.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", type=int, default=400)
    ap.add_argument("--trials", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from mkbsim.catalog import load_catalog

    torch.set_num_threads(1)
    problem = load_catalog().get("p26")
    rng = random.Random(args.seed)
    draw = problem.make_inputs
    pool = [small_tensors(tuple(draw(problem.smoke, seed=rng.getrandbits(31)))) for _ in range(args.pool)]
    for names in (["counts"], ["first offsets"], ["lengths"], ["counts", "first offsets", "lengths"]):
        print(json.dumps({"tensors": names, **rates(pool, names, args.trials, rng)}))


if __name__ == "__main__":
    main()
