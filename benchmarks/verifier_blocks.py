"""The verifier's median against the same run() in a plain loop, and the harness's time between timed calls.

    python benchmarks/verifier_blocks.py --backend cpu examples/submissions/p36_rmsnorm_tirx.py:p36:tirx
    # on the H200 (benchmarks/gpu_verifier.sh blocks runs this):
    python3 benchmarks/verifier_blocks.py --backend cuda --workload production \\
        examples/submissions/cuda/p36_rmsnorm_cutedsl.py:p36:cutedsl \\
        problems/attention/solutions/02_splitkvprefetch_tirx.py:p02:tirx --json $OUT/blocks.json

For each FILE:PROBLEM:DSL, side by side (medians, ms): the verifier's median, its null calls, the host clock
around the call, the harness's gap between one timed call's timer and the next one's (blocks:
``details.harness_gap_ms``; a checkout before blocks has none, and its timing phase's wall time per call says the
same: the worker waits for the verifier between calls), the timing phase's and the whole verification's wall
time; then the same run() in this process, in a plain loop timed the paper protocol's way (cpu: the host clock;
cuda: synchronise, record, call, record, synchronise), and on cuda ``triton.testing.do_bench``. Run it with
``PYTHONPATH`` at another checkout to compare (``git archive COMMIT | tar -x -C DIR``). benchmarks/RESULTS.md,
"Timed calls in blocks".
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

WARMUPS, CALLS = 10, 50


def _median(xs: list[float] | None) -> float | None:
    return round(float(statistics.median(xs)), 4) if xs else None


def plain_loop(path: Path, problem: Any, workload: str, device: str) -> dict[str, float | None]:
    """run() on one draw, back to back, timed as the paper protocol times a call: median ms."""
    import torch

    spec = importlib.util.spec_from_file_location(f"blocks_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    axes = problem.smoke if workload == "smoke" else problem.workload
    inputs = problem.make_inputs(axes, seed=7, device=device)
    times = []
    for i in range(WARMUPS + CALLS):
        if device == "cuda":
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            module.run(*inputs)
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end)
        else:
            t0 = time.perf_counter()
            module.run(*inputs)
            ms = (time.perf_counter() - t0) * 1e3
        if i >= WARMUPS:
            times.append(ms)
    row: dict[str, float | None] = {"plain_loop_ms": _median(times)}
    if device == "cuda":
        import triton.testing

        fn = lambda: module.run(*inputs)  # noqa: E731
        row["do_bench_ms"] = round(float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")), 4)
    return row


def verified(session: Any, path: Path, problem: str, dsl: str, workload: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    report = session.verify(path, problem, dsl, workload=workload)
    wall = time.perf_counter() - t0
    d = report.details
    timing = d.get("timing") or {}
    phases = d.get("overhead") or {}
    calls = sum(len(timing.get(k) or []) for k in ("warmup_ms", "timed_ms", "null_ms")) + len(
        (d.get("evidence_calls") or {}).get("ms") or []
    )
    return {
        "passed": report.passed,
        "failure": report.failure,
        "median_ms": _median(timing.get("timed_ms")),
        "null_ms": _median(timing.get("null_ms")),
        "host_ms": _median(timing.get("host_ms")),
        "harness_gap_ms": _median(d.get("harness_gap_ms")),
        "timing_ms_per_call": round(phases["timing_s"] * 1e3 / calls, 3) if calls and "timing_s" in phases else None,
        "timing_s": round(phases.get("timing_s", 0.0), 3),
        "verify_s": round(wall, 3),
        "eager_ms": report.eager_ms,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", help="FILE:PROBLEM:DSL")
    parser.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--workload", default=None)
    parser.add_argument("--repeat", type=int, default=3, help="verifications of each file (the first warms up)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import torch

    from mkbsim.catalog import load_catalog
    from mkbsim.verifier import VerifierSession

    torch.set_num_threads(1)
    workload = args.workload or ("smoke" if args.backend == "cpu" else "production")
    out: dict[str, Any] = {"load": os.getloadavg()[0], "rows": {}}
    with VerifierSession(args.backend) as session:
        for case in args.cases:
            file, problem, dsl = case.rsplit(":", 2)
            runs = [verified(session, Path(file), problem, dsl, workload) for _ in range(args.repeat)]
            row: dict[str, Any] = {"runs": runs}
            for key in ("median_ms", "null_ms", "host_ms", "harness_gap_ms", "timing_ms_per_call", "verify_s"):
                values = [r[key] for r in runs[1:] or runs if r[key] is not None]
                row[key] = _median(values)
            row.update(plain_loop(Path(file), load_catalog().get(problem), workload, args.backend))
            out["rows"][case] = row
            print(case, json.dumps({k: v for k, v in row.items() if k != "runs"}), flush=True)
    out["load_after"] = os.getloadavg()[0]
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
