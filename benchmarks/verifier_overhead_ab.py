"""The per-call harness overhead of several checkouts, interleaved: `verifier_overhead.py`'s measure, each checkout's
own, one fresh process per run, the checkouts in turn (A B C, then C B A, ...), so that they share the load.

    git archive ace0e8b | tar -x -C /tmp/ovh_ace          # a checkout of each commit to compare
    python benchmarks/verifier_overhead_ab.py --rounds 6 --calls 3000 /tmp/ovh_ace .

Per run, of the CPU µs per call (`measure_variant`'s own numbers: its timed calls after the warm-up): the median
(what `verifier_overhead.py --json` reports as ``cpu_us``) and the *quiet* figure, the least median over windows of
100 consecutive calls. On a shared machine a run's median moves 2x with the load (other processes evict the caches
and share the cores during the run's ~50 ms of calls); a quiet window is the harness's own cost. Then, per checkout,
the median over the runs of each figure, its range, and its ratio to the first checkout's. benchmarks/RESULTS.md,
"Per-call harness overhead, session 9".
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

WINDOW = 100  # calls per window of the quiet figure


def figures(xs: list[float]) -> dict[str, float]:
    """The run's median and quiet figure (µs), in call order."""
    windows = [statistics.median(xs[i : i + WINDOW]) for i in range(0, len(xs) - WINDOW + 1, WINDOW)]
    return {"median": float(statistics.median(xs)), "quiet": float(min(windows, default=statistics.median(xs)))}


def measure_in(tree: Path, variant: str, calls: int) -> dict[str, Any]:
    """In this process (a fresh one): the checkout's own `measure_variant`, its per-call lists kept whole."""
    sys.path.insert(0, str(tree))
    spec = importlib.util.spec_from_file_location("verifier_overhead", tree / "benchmarks" / "verifier_overhead.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module._median = figures  # the script reduces its lists with _median: keep both figures
    row = module.measure_variant(variant, calls, 1.0, 1)
    import mkbsim  # the checkout's own, not this one's

    if not Path(mkbsim.__file__).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"mkbsim imported from {mkbsim.__file__}, not from {tree}")
    return {"cpu_us": row["cpu_us"], "wall_us": row["wall_us"]}


def run(tree: Path, variant: str, calls: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--one", str(tree), "--variant", variant, "--calls", str(calls)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=tree, env=env).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trees", nargs="*", type=Path, help="checkouts to compare (the first is the reference)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--variant", default="guards")
    ap.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # internal: one run, in a fresh process
    a = ap.parse_args()
    if a.one:
        print(json.dumps(measure_in(a.one, a.variant, a.calls)))
        return
    missing = [str(t) for t in a.trees if not (t / "benchmarks" / "verifier_overhead.py").is_file()]
    if not a.trees or a.rounds < 1 or a.calls < WINDOW or missing:
        not_ones = f" (not: {' '.join(missing)})" if missing else ""
        print(f"verifier_overhead_ab: give checkouts holding benchmarks/verifier_overhead.py{not_ones}, --rounds >= 1, "
              f"--calls >= {WINDOW}", file=sys.stderr)  # fmt: skip
        raise SystemExit(2)
    runs: dict[Path, list[dict[str, float]]] = {t: [] for t in a.trees}
    for r in range(a.rounds):
        for tree in a.trees if r % 2 == 0 else a.trees[::-1]:
            cpu = run(tree, a.variant, a.calls)["cpu_us"]
            runs[tree].append(cpu)
            load = os.getloadavg()[0]
            print(f"round {r} {tree}: median {cpu['median']:.1f} quiet {cpu['quiet']:.1f} µs (load {load:.1f})")
    print(f"\n{a.variant}, {a.calls} calls a run, {a.rounds} runs each, CPU µs per call: median over runs [range]")
    print("| checkout | median | ratio | quiet | ratio |\n|---|---|---|---|---|")
    first: dict[str, float] = {}
    for tree, rows in runs.items():
        cells = []
        for key in ("median", "quiet"):
            xs = [row[key] for row in rows]
            mid = statistics.median(xs)
            first.setdefault(key, mid)
            cells.append(f"{mid:.1f} [{min(xs):.1f}-{max(xs):.1f}] | {mid / first[key]:.2f}")
        print(f"| {tree} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
