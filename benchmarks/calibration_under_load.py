"""The figures the calibration and the scored-time rule compare, for honest cases under k busy processes: one JSON
line per verification (verifier README, "The calibration"; RESULTS.md, "The calibration under load").

    .venv/bin/python benchmarks/calibration_under_load.py --busy 8 --runs 10 [--staged] [--fresh] FILE:PROBLEM

Per verification: the null calls' harness overhead (the cross-check's measure less the reported time, median) in
the candidate's worker and in the eager reference's, the calling thread's share of it, the CPU the threads beside
the calling one spent during the null calls (mean: the cpu calibration's figure), whether the rule before session 14
(overhead above 4x the reference's + 0.25 ms) would have failed it, the verdict, and the scored-time rule's figures
with the evidence calls' CPU less what the gate's vault measured of its own work. ``--fresh``: the eager baseline
measured again for every verification, right after the candidate's (as the old rule's retry did); ``--staged``: the
draws staged through the worker's memory (``MKBSIM_VERIFIER_STAGED_ARENAS``, as a sandboxed cuda worker gets them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

OLD_FACTOR, OLD_FLOOR_MS = 4.0, 0.25  # the rule before session 14


@contextlib.contextmanager
def busy(k: int) -> Iterator[None]:
    """``k`` processes spinning on the CPU for as long as the block runs."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(k)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _null_figures(reported: Sequence[float], nulls: Sequence[Any], eager_reported: Sequence[float],
                  eager: Sequence[Any]) -> dict[str, Any]:  # fmt: skip
    from mkbsim.verifier._trusted import null_others, wall_bound

    def over(calls: Sequence[Any], ms: Sequence[float], measure: Any) -> float:
        return float(statistics.median(measure(t) - r for t, r in zip(calls, ms, strict=True)))

    found = {
        "candidate_ms": over(nulls, reported, wall_bound),
        "candidate_thread_ms": over(nulls, reported, lambda t: t.thread_cpu_ms),
        "eager_ms": over(eager, eager_reported, wall_bound),
        "beside_ms": null_others(nulls),
        "beside_max_ms": max(t.cpu_ms - t.thread_cpu_ms for t in nulls),
    }
    found["old_rule_fails"] = found["candidate_ms"] > OLD_FACTOR * max(found["eager_ms"], 0.0) + OLD_FLOOR_MS
    return found


def _scored_figures(details: dict[str, Any]) -> dict[str, Any]:
    found = dict(details.get("scored_time") or {})
    evidence = details.get("evidence_calls") or {}
    if evidence.get("cpu_ms") and evidence.get("work"):
        spent = [w["ms"] if w else 0.0 for w in evidence["work"]]
        found["evidence_cpu_ms"] = statistics.median(evidence["cpu_ms"])
        found["vault_ms"] = statistics.median(spent)
        found["launches"] = statistics.median(evidence["launches"])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", help="FILE:PROBLEM")
    parser.add_argument("--busy", type=int, default=0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--staged", action="store_true")
    parser.add_argument("--fresh", action="store_true")
    args = parser.parse_args()
    path, _, problem = args.case.rpartition(":")
    if not path or not Path(path).is_file():
        parser.error(f"{args.case}: expected FILE:PROBLEM with an existing file")
    if args.staged:
        os.environ["MKBSIM_VERIFIER_STAGED_ARENAS"] = "1"

    import torch

    from mkbsim.verifier import VerifierSession, _phases

    torch.set_num_threads(1)
    seen: list[tuple[Any, Any]] = []  # each round's null calls, reported and trusted (the last round's decide)
    judge = _phases.cross_check

    def recording(v: Any) -> Any:
        seen.append((v.timing["null_ms"], v.timing["null_trusted"]))
        return judge(v)

    _phases.cross_check = recording
    with VerifierSession("cpu") as session:
        session.verify(path, problem, "tirx")  # warm: the zygote, the eager baseline
        with busy(args.busy):
            for _ in range(args.runs):
                seen.clear()
                if args.fresh:
                    session._eager.clear()
                report = session.verify(path, problem, "tirx")
                eager = next(b for k, b in session._eager.items() if k[0] == problem)  # the one problem's baseline
                row = {"busy": args.busy, "load": os.getloadavg()[0], "failure": report.failure,
                       "rounds": [r.get("failure") for r in report.details.get("timing_rounds") or []],
                       "nulls": _null_figures(*seen[-1], eager.null_ms, eager.null_trusted) if seen else None,
                       "scored": _scored_figures(report.details)}  # fmt: skip
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
