"""The scored-time rule on cpu (``_judge.scored_dsl_time``) under load: for each case, verifications with ``k``
processes spinning beside them, one JSON line each: the verdict, each timing round's failure and its medians of
the scored and the evidence calls' DSL time (the vault's clock around every launch) and their ratio, against the
rule's share (benchmarks/RESULTS.md, "Scored against watched launches").

    .venv/bin/python benchmarks/scored_dsl_under_load.py --busy 0 4 --runs 3 FILE:PROBLEM [FILE:PROBLEM ...]

``--order``: the timing phase's order fixed (the test kit's way), so that a case that counts its calls knows
which are the evidence calls (``tests/verifier/evidence/known_plan_idle_kernel.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


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


def _rounds(report: Any) -> list[dict[str, Any]]:
    rows = []
    for r in report.details.get("timing_rounds") or []:
        scored, watched = r.get("dsl_median_ms"), r.get("evidence_dsl_median_ms")
        ratio = scored / watched if scored is not None and watched else None
        rows.append({"failure": r.get("failure"), "scored_dsl_ms": scored, "watched_dsl_ms": watched, "ratio": ratio})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", help="FILE:PROBLEM")
    parser.add_argument("--busy", type=int, nargs="+", default=[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--order", action="store_true")
    args = parser.parse_args()
    cases = [case.rpartition(":") for case in args.cases]
    for path, _, problem in cases:
        if not path or not Path(path).is_file():
            parser.error(f"{path}:{problem}: expected FILE:PROBLEM with an existing file")

    import torch

    from mkbsim.verifier import VerifierSession, _judge, _phases

    torch.set_num_threads(1)
    with VerifierSession("cpu") as session:
        for k in args.busy:
            with busy(k):
                for path, _, problem in cases:
                    for _ in range(args.runs):
                        if args.order:  # sorting keeps the plan's order
                            _phases.rng.random = iter(range(10**6)).__next__  # type: ignore[method-assign]
                        report = session.verify(path, problem, "tirx")
                        row = {"case": Path(path).stem, "busy": k, "load": round(os.getloadavg()[0], 1),
                               "failure": report.failure, "share": _judge.SCORED_DSL_SHARE,
                               "rounds": _rounds(report)}  # fmt: skip
                        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
