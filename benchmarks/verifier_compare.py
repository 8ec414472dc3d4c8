"""This checkout's verifier beside another checkout's (by default `main`), in one run, on this machine.

    python benchmarks/verifier_compare.py                       # main checked out at /tmp/verifier-main
    python benchmarks/verifier_compare.py --other /path/to/checkout --warm-runs 5 --json OUT.json

Two parts, each verifier in its own processes (a fresh session per example, as a campaign runs it), the
two checkouts interleaved so that machine load hits both alike:

* overhead, on the cpu examples (TIRx for llvm, SMOKE shapes): the wall time of a warm verification
  beyond its kernel's own time (median runtime x the calls the protocol makes), and the harness's cost
  per call: the round trip around a timed call minus its reported time (wall), and the worker's CPU time
  around it minus the reported time;
* the adversarial cases of this checkout that the other one does not have (``tests/verifier/adversarial``),
  each verified by both: which tricks the other verifier let pass.

The other checkout is created with ``git worktree add --detach PATH main`` when PATH does not exist.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = [
    ("p36_rmsnorm_tirx.py", "p36"),
    ("p28_fused_add_rmsnorm_tirx.py", "p28"),
    ("p25_kv_block_copy_tirx.py", "p25"),
]
ADVERSARIAL = ROOT / "tests" / "verifier" / "adversarial"

# Runs inside a checkout (its mkbsim first on the import path): verifies files, prints one JSON line each.
_PROBE = r"""
import json, sys, time, statistics, torch
torch.set_num_threads(1)
from mkbsim.verifier import PAPER, Limits, VerifierSession
calls = PAPER.correctness_draws + PAPER.suppressed_draws + PAPER.warmup_calls + PAPER.timed_calls
jobs = json.loads(sys.argv[1])
with VerifierSession("cpu", limits=Limits(call_timeout_s=20.0)) as session:
    for job in jobs:
        t0 = time.perf_counter()
        r = session.verify(job["file"], job["problem"], "tirx", static_scan=job.get("static", True))
        wall = time.perf_counter() - t0
        t = r.details.get("timing") or {}
        timed, trips, cpu = t.get("timed_ms") or [], t.get("round_trip_ms") or [], t.get("worker_cpu_ms") or []
        row = {"file": job["file"], "run": job.get("run"), "passed": r.passed, "failure": r.failure, "wall_s": wall,
               "runtime_ms": r.runtime_ms, "eager_ms": r.eager_ms}
        if r.passed:
            row["beyond_kernel_s"] = wall - r.runtime_ms * calls / 1e3
            row["harness_wall_ms"] = statistics.median(rt - x for rt, x in zip(trips, timed))
            if cpu and all(c is not None for c in cpu):
                row["harness_cpu_ms"] = statistics.median(c - x for c, x in zip(cpu, timed))
        print(json.dumps(row), flush=True)
"""


def ensure_checkout(path: Path, ref: str) -> None:
    if not path.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), ref], check=True)


def run_jobs(checkout: Path, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(jobs)], cwd=checkout, env=env,
                         capture_output=True, text=True, timeout=3600)  # fmt: skip
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if len(rows) != len(jobs):
        raise SystemExit(f"{checkout}: {len(rows)} of {len(jobs)} verifications answered\n{out.stderr[-3000:]}")
    return rows


def _median(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return float(statistics.median(values)) if values else None


def overhead(checkouts: dict[str, Path], warm_runs: int, rounds: int) -> list[dict[str, Any]]:
    table = []
    for file, problem in EXAMPLES:
        path = str(ROOT / "examples" / "submissions" / file)
        jobs = [{"file": path, "problem": problem, "run": "cold"}] + [
            {"file": path, "problem": problem, "run": "warm"} for _ in range(warm_runs)
        ]
        warm: dict[str, list[dict[str, Any]]] = {name: [] for name in checkouts}
        for _ in range(rounds):  # interleaved: each round runs both checkouts back to back
            for name, checkout in checkouts.items():
                rows = run_jobs(checkout, jobs)
                warm[name] += [r for r in rows if r["run"] == "warm"]
                print(f"{name} {file}: {[round(r['wall_s'], 2) for r in rows]}", file=sys.stderr)
        for name, rows in warm.items():
            table.append({"example": file, "verifier": name, "passed": all(r["passed"] for r in rows),
                          **{k: _median(rows, k) for k in ("wall_s", "beyond_kernel_s", "runtime_ms", "eager_ms",
                                                           "harness_wall_ms", "harness_cpu_ms")}})  # fmt: skip
    return table


def new_cases(other: Path) -> list[Path]:
    theirs = {p.name for p in (other / "tests" / "verifier" / "adversarial").glob("*.py")}
    return sorted(p for p in ADVERSARIAL.glob("*.py") if p.name not in theirs and not p.name.startswith("_"))


def adversarial(checkouts: dict[str, Path], cases: list[Path]) -> list[dict[str, Any]]:
    jobs = []
    for path in cases:
        text = path.read_text()
        problem = re.search(r"^# problem: (\w+)$", text, re.M)
        jobs.append({"file": str(path), "problem": problem.group(1) if problem else "p36",
                     "static": "# static-scan: off" not in text, "run": path.stem})  # fmt: skip
    results = {name: run_jobs(checkout, jobs) for name, checkout in checkouts.items()}
    table = []
    for i, path in enumerate(cases):
        expect = re.search(r"^# expect: (\w+)$", path.read_text(), re.M)
        row = {"case": path.stem, "expect": expect.group(1) if expect else None}
        for name in checkouts:
            r = results[name][i]
            row[name] = "PASSED" if r["passed"] else r["failure"]
        table.append(row)
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--other", type=Path, default=Path("/tmp/verifier-main"), help="the checkout to compare with")
    ap.add_argument("--ref", default="main", help="what to check out there when it does not exist")
    ap.add_argument("--warm-runs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds per example")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    ensure_checkout(a.other, a.ref)
    checkouts = {"this": ROOT, "other": a.other.resolve()}
    over = overhead(checkouts, a.warm_runs, a.rounds)
    adv = adversarial(checkouts, new_cases(a.other))
    load = os.getloadavg()[0]
    machine = f"{platform.node()} · {os.cpu_count()} cpus · load {load:.1f} · Python {platform.python_version()}"
    print(f"\nverifier comparison · {machine} · other = {a.other} ({a.ref})\n")
    cols = ["example", "verifier", "passed", "wall_s", "beyond_kernel_s", "runtime_ms", "eager_ms", "harness_wall_ms",
            "harness_cpu_ms"]  # fmt: skip
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in over:
        print("| " + " | ".join(f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c]) for c in cols) + " |")
    print("\n| case | expected | this | other |\n|---|---|---|---|")
    for r in adv:
        print(f"| {r['case']} | {r['expect']} | {r['this']} | {r['other']} |")
    if a.json:
        a.json.write_text(json.dumps({"machine": machine, "overhead": over, "adversarial": adv}, indent=1))


if __name__ == "__main__":
    main()
