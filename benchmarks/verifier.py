"""The verifier's own overhead per submission, against the time its kernel actually runs.

    python benchmarks/verifier.py                      # cpu backend, SMOKE shapes, the TIRx examples
    python benchmarks/verifier.py --backend cuda       # the CuTe DSL and TIRx examples, production shapes

For each example submission: one cold verification in a fresh session (starting the zygote, which
imports torch and the DSLs once, and measuring the eager baseline), then warm verifications in the
same session, as a campaign runs them. Overhead = wall time of a verification minus the kernel's
median time × the calls the protocol makes (5 draws + 1 suppressed + 10 warmup + 50 timed).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from mkbsim.verifier import PAPER, VerifierSession
from mkbsim.verifier._phases import EVIDENCE_CALLS

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {
    "cpu": [
        ("p36_rmsnorm_tirx.py", "p36", "tirx"),
        ("p28_fused_add_rmsnorm_tirx.py", "p28", "tirx"),
        ("p25_kv_block_copy_tirx.py", "p25", "tirx"),
    ],
    "cuda": [
        ("cuda/p36_rmsnorm_cutedsl.py", "p36", "cutedsl"),
        ("cuda/p28_fused_add_rmsnorm_cutedsl.py", "p28", "cutedsl"),
        ("cuda/p36_rmsnorm_tirx_cuda.py", "p36", "tirx"),
        ("cuda/p28_fused_add_rmsnorm_tirx_cuda.py", "p28", "tirx"),
    ],
}
# run() calls: the draws, the warmups, the scored timed calls and the unscored evidence calls
CALLS = PAPER.correctness_draws + PAPER.suppressed_draws + PAPER.warmup_calls + PAPER.timed_calls + EVIDENCE_CALLS
PHASES = ("zygote_start_s", "spawn_import_s", "anchors_s", "correctness_s", "timing_s", "sol_s", "eager_s")


def _row(name: str, kind: str, wall_s: float, report: Any) -> dict[str, Any]:
    if not report.passed:
        raise SystemExit(f"{name}: {report.failure}: {report.feedback}")
    phases = report.details["overhead"]
    kernel_s = report.runtime_ms * CALLS / 1e3
    return {
        "submission": name,
        "run": kind,
        "wall_s": wall_s,
        **{p: phases.get(p, 0.0) for p in PHASES},
        "kernel_x_calls_s": kernel_s,
        "overhead_s": wall_s - kernel_s,
        "outside_s": wall_s - phases["total_s"],  # session set-up, catalogue, environment
        "runtime_ms": report.runtime_ms,
        "eager_ms": report.eager_ms,
    }


def measure(backend: str, workload: str, warm_runs: int) -> list[dict[str, Any]]:
    rows = []
    for file, problem, dsl in EXAMPLES[backend]:
        path = ROOT / "examples" / "submissions" / file
        t0 = time.perf_counter()
        with VerifierSession(backend) as session:
            report = session.verify(path, problem, dsl, workload=workload)
            cold = time.perf_counter() - t0
            rows.append(_row(file, "cold", cold, report))
            warm = []
            for _ in range(warm_runs):
                t1 = time.perf_counter()
                report = session.verify(path, problem, dsl, workload=workload)
                warm.append(_row(file, "warm", time.perf_counter() - t1, report))
        median = {k: statistics.median(r[k] for r in warm) for k in warm[0] if isinstance(warm[0][k], float)}
        rows.append({"submission": file, "run": f"warm (median of {warm_runs})", **median})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    cols = [("submission", "{}"), ("run", "{}"), ("wall_s", "{:.2f}"), ("zygote_start_s", "{:.2f}"),
            ("spawn_import_s", "{:.3f}"), ("anchors_s", "{:.3f}"), ("correctness_s", "{:.3f}"),
            ("timing_s", "{:.3f}"), ("sol_s", "{:.3f}"), ("eager_s", "{:.3f}"), ("kernel_x_calls_s", "{:.4f}"),
            ("outside_s", "{:.2f}"), ("overhead_s", "{:.2f}"), ("runtime_ms", "{:.4f}"),
            ("eager_ms", "{:.4f}")]  # fmt: skip
    lines = ["| " + " | ".join(c for c, _ in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [fmt.format(r[c]) if c in r else "" for c, fmt in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--workload", choices=("smoke", "production"))
    parser.add_argument("--warm-runs", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    workload = args.workload or ("production" if args.backend == "cuda" else "smoke")
    rows = measure(args.backend, workload, args.warm_runs)
    device = torch.cuda.get_device_name() if args.backend == "cuda" else platform.processor() or platform.machine()
    python = sys.version.split()[0]
    print(f"verifier overhead · backend {args.backend} · workload {workload} · {device} · python {python}")
    print(f"calls per verification: {CALLS}; overhead = wall − kernel median × calls\n")
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
