"""The honest distribution of the DSL-time rule's ratio (DESIGN §5, "audits cannot be told apart"): the
evidence calls' median DSL time over the least DSL time of a correctness draw, for honest submissions.

    python benchmarks/dsl_time_ratio.py --repeats 3            # cpu: the examples and tests/verifier/honest
    python benchmarks/dsl_time_ratio.py --extra DIR --repeats 1  # and every *.py in DIR (p36, tirx)

Prints one line per verification and the distribution; ``_coverage.DSL_TIME_SHARE`` must stay well below
its least value.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from mkbsim.verifier import VerifierSession

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    (ROOT / "examples" / "submissions" / "p36_rmsnorm_tirx.py", "p36"),
    (ROOT / "examples" / "submissions" / "p28_fused_add_rmsnorm_tirx.py", "p28"),
    *((p, "p36") for p in sorted((ROOT / "tests" / "verifier" / "honest").glob("*.py"))),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--extra", type=Path, help="a folder of further honest p36 submissions")
    args = parser.parse_args()
    cases = CASES + ([(p, "p36") for p in sorted(args.extra.glob("*.py"))] if args.extra else [])
    ratios: list[float] = []
    with VerifierSession("cpu") as session:
        for path, problem in cases:
            for _ in range(args.repeats):
                report = session.verify(path, problem, "tirx")
                found = report.details.get("dsl_time") or {}
                ratio = found.get("ratio")
                print(f"{path.name} {problem}: passed={report.passed} ratio={ratio} load={os.getloadavg()[0]:.1f}",
                      file=sys.stderr)  # fmt: skip
                if ratio is not None:
                    ratios.append(ratio)
    ratios.sort()
    fifth, median = ratios[len(ratios) // 20], statistics.median(ratios)
    print(f"{len(ratios)} verifications: least {ratios[0]:.3f}, 5th percentile {fifth:.3f}, median {median:.3f}, "
          f"most {ratios[-1]:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
