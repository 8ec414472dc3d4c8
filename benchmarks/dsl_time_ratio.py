"""The DSL-time rule's ratio (DESIGN §5, "audits cannot be told apart"): the evidence calls' median DSL time
over the least DSL time of a correctness draw, for honest submissions and for the audit-aware ones (the same
kernel doing less work when not audited).

    python benchmarks/dsl_time_ratio.py --repeats 3            # cpu: the examples and tests/verifier/honest
    python benchmarks/dsl_time_ratio.py --extra DIR --repeats 1  # and every *.py in DIR (p36, tirx)

Prints one line per verification and both distributions; ``_coverage.DSL_TIME_SHARE`` must stay well below the
honest ones' least, and sits above the audit-aware cases' largest where the rule closes them.
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
#: The same kernel doing less work when not audited: fewer repeats (rejected by this rule alone), no rows (open).
AUDIT_AWARE = [
    (ROOT / "tests" / "verifier" / "adversarial" / name, "p36")
    for name in ("_open_audit_aware_no_row_launch.py", "audit_aware_idle_kernel.py")
]


def _ratios(session: VerifierSession, cases: list[tuple[Path, str]], repeats: int) -> list[float]:
    found: list[float] = []
    for path, problem in cases:
        for _ in range(repeats):
            report = session.verify(path, problem, "tirx")
            dsl_time = report.details.get("dsl_time") or {}
            ratio = dsl_time.get("ratio")
            why = "" if report.passed else f" ({report.feedback[:160]})"
            print(f"{path.name} {problem}: passed={report.passed} failure={report.failure} ratio={ratio} "
                  f"load={os.getloadavg()[0]:.1f}{why}", file=sys.stderr)  # fmt: skip
            if ratio is not None:
                found.append(ratio)
    return sorted(found)


def _summary(name: str, ratios: list[float]) -> str:
    if not ratios:
        return f"{name}: no ratio measured"
    fifth, median = ratios[len(ratios) // 20], statistics.median(ratios)
    return (f"{name}: {len(ratios)} verifications: least {ratios[0]:.3f}, 5th percentile {fifth:.3f}, "
            f"median {median:.3f}, most {ratios[-1]:.3f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--extra", type=Path, help="a folder of further honest p36 submissions")
    args = parser.parse_args()
    cases = CASES + ([(p, "p36") for p in sorted(args.extra.glob("*.py"))] if args.extra else [])
    with VerifierSession("cpu") as session:
        honest = _ratios(session, cases, args.repeats)
        aware = _ratios(session, AUDIT_AWARE, args.repeats)
    print(_summary("honest", honest))
    print(_summary("audit-aware", aware))


if __name__ == "__main__":
    main()
