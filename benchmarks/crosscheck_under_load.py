"""Verdicts of one case verified many times in one session under k busy processes, and for each timing-cross-check
failure the figures it compared (RESULTS.md, "Verifier faults behind the suite's flakes").

    .venv/bin/python benchmarks/crosscheck_under_load.py --busy 3 --runs 100 \
        examples/submissions/p36_rmsnorm_tirx.py:p36

One JSON line per verification (its verdict, each timing round's failure); where the trusted clock's cross-check
failed, also its figures and the null calls' and timed calls' unexplained CPU (the measure less the reported time),
sorted: on a loaded VM a quarter to a third of both cost 0.1-0.4 ms more. A last line counts the verdicts.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
from pathlib import Path
from typing import Any

from calibration_under_load import busy

from mkbsim.verifier import VerifierSession, _phases, _trusted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", help="FILE:PROBLEM")
    parser.add_argument("--busy", type=int, default=3)
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    path, problem = args.case.rsplit(":", 1)
    compared: dict[str, Any] = {}

    def recording(reported: Any, calls: Any, null_reported: Any, nulls: Any, device_type: str) -> dict[str, Any]:
        out = _trusted.cross_check(reported, calls, null_reported, nulls, device_type)
        over = [_trusted.wall_bound(c) - r for c, r in zip(nulls, null_reported, strict=True)]
        harness = statistics.median(over)
        excess = [_trusted.wall_bound(c) - r - harness for c, r in zip(calls, reported, strict=True)]
        compared.update(out=out, null_over_ms=sorted(over), excess_ms=sorted(excess))
        return out

    _phases.trusted_cross_check = recording  # the phase's own reference: every round's check passes through here
    verdicts: collections.Counter[str] = collections.Counter()
    with busy(args.busy), VerifierSession("cpu") as session:
        for i in range(args.runs):
            compared.clear()
            report = session.verify(Path(path), problem, "tirx")
            rounds = [r.get("failure") for r in report.details.get("timing_rounds") or []]
            row: dict[str, Any] = {"run": i, "failure": report.failure, "rounds": rounds}
            if report.failure == "timing_tamper" and compared.get("out", {}).get("tampered"):
                row["cross_check"] = {k: compared[k] for k in ("out", "null_over_ms", "excess_ms")}
            verdicts[str(report.failure)] += 1
            print(json.dumps(row, default=str), flush=True)
    print(json.dumps({"busy": args.busy, "runs": args.runs, "verdicts": dict(verdicts)}))


if __name__ == "__main__":
    main()
