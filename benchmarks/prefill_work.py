"""How much tensor-core work the causal prefill kernels (p04-p09) execute against what `cost()` counts.

    .venv/bin/python benchmarks/prefill_work.py            # the production WORKLOAD, three draws
    .venv/bin/python benchmarks/prefill_work.py --seeds 5

Speed of light (DESIGN §5) comes from each problem's `cost(WORKLOAD)`, whose causal pairs assume every
sequence has the mean lengths; the draws have random lengths, so the exact causal pairs are more. A kernel
that walks (BM query rows) x (BN KV tokens) tiles executes more again: the diagonal tiles are computed
whole and partly masked. The printed ratios bound a kernel's SOL fraction from above:
SOL fraction <= (cost / executed) x (tensor-core efficiency) / (wave imbalance), before launch overheads.

Wave imbalance: CTAs in grid order (heads fastest, each sequence's query tiles from the last) handed to
132 SMs one CTA each, each taking its KV tiles + `--prologue` tile-times (Q load, first S, last P·V,
epilogue: one CTA an SM cannot overlap them with another's), against the perfectly even split.
"""

from __future__ import annotations

import argparse
import heapq
import sys
from typing import Any

from mkbsim.catalog import load_problem, problems_root

PLANS = {"wgmma": lambda d: (128, 128 if d == 128 else 64), "fused": lambda d: (64, 64)}  # (BM, BN) by head dim


def tile_counts(problem: Any, seed: int, bm: int, bn: int) -> tuple[list[int], float]:
    """KV tiles of every CTA in grid order, and the exact causal (query, key) pairs of the draw."""
    w = problem.workload
    x = dict(zip(problem.inputs, problem.make_inputs(w, seed=seed), strict=True))
    qo, kvp = x["qo_indptr"].tolist(), x["kv_indptr"].tolist()
    page, last = w.get("page_size", 0), x.get("kv_last_page_len")
    ctas, pairs = [], 0.0
    for b in range(len(qo) - 1):
        lq = qo[b + 1] - qo[b]
        lk = kvp[b + 1] - kvp[b] if page <= 1 else (kvp[b + 1] - kvp[b] - 1) * page + int(last[b])
        delta = lk - lq
        pairs += sum(min(lk, i + delta + 1) for i in range(lq))
        for m in reversed(range((lq + bm - 1) // bm)):
            ntile = (m * bm + min(lq - m * bm, bm) + delta + bn - 1) // bn
            ctas += [ntile] * w["num_qo_heads"]
    return ctas, pairs


def imbalance(ctas: list[int], prologue: float, sms: int = 132) -> float:
    finish = [0.0] * sms
    for tiles in ctas:
        heapq.heappush(finish, heapq.heappop(finish) + tiles + prologue)
    return max(finish) * sms / sum(tiles + prologue for tiles in ctas)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="draws of the WORKLOAD to average")
    parser.add_argument("--prologue", type=float, default=1.5, help="tile-times a CTA spends outside its KV loop")
    args = parser.parse_args(argv)
    print("| problem | plan | cost GFLOP | exact causal GFLOP | executed GFLOP | cost / executed | wave imbalance |")
    print("|---|---|---|---|---|---|---|")
    for path in sorted((problems_root() / "attention").glob("0[4-9]_*.py")):
        problem = load_problem(path)
        w = problem.workload
        hq, d = w["num_qo_heads"], w["head_dim"]
        cost = problem.cost(w).flops["bf16"]
        for plan, shape in PLANS.items():
            bm, bn = shape(d)
            exact = executed = waves = 0.0
            for seed in range(1, args.seeds + 1):
                ctas, pairs = tile_counts(problem, seed, bm, bn)
                exact += 4 * hq * d * pairs / args.seeds
                executed += sum(ctas) * 4 * bm * bn * d / args.seeds
                waves += imbalance(ctas, args.prologue) / args.seeds
            print(f"| {problem.id} | {plan} | {cost / 1e9:.0f} | {exact / 1e9:.0f} | {executed / 1e9:.0f} "
                  f"| {cost / executed:.2f} | {waves:.2f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
