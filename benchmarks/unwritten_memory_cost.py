"""What erasing memory no recorded writer left costs a correctness draw (verifier README, "Memory no recorded writer
left"): full verifications on cpu, the draws' own times (``details.draws[].ms``, the worker's call with the vault's
work in it) and the census of the tensors alive at each draw's start (``details.memory``: storages, bytes, ms).

    python benchmarks/unwritten_memory_cost.py FILE:PROBLEM [FILE:PROBLEM ...] [--rounds 3]
    PYTHONPATH=/path/to/another/checkout python benchmarks/unwritten_memory_cost.py ...   # side by side

Prints one JSON line per verification: the file, the median and max draw ms, the correctness phase's seconds, and the
census's median ms, storages and MiB (None where the checkout has no census).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cases", nargs="+", help="FILE:PROBLEM")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from mkbsim.verifier import VerifierSession

    with VerifierSession("cpu") as session:
        for _ in range(args.rounds):
            for case in args.cases:
                path, problem = case.rsplit(":", 1)
                report = session.verify(Path(path), problem, "tirx")
                draws = [d["ms"] for d in report.details.get("draws", [])]
                memory = report.details.get("memory") or []
                print(json.dumps({
                    "file": Path(path).name, "passed": report.passed,
                    "draw_ms_median": round(statistics.median(draws), 2) if draws else None,
                    "draw_ms_max": round(max(draws), 2) if draws else None,
                    "correctness_s": round(report.details.get("overhead", {}).get("correctness_s", 0.0), 3),
                    "census_ms_median": round(statistics.median(m[4] for m in memory), 2) if memory else None,
                    "census_storages": memory[0][2] if memory else None,
                    "census_mib": round(memory[0][3] / 2**20, 2) if memory else None,
                    "erased_bytes": [m[1] for m in memory] if memory else None,
                }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
