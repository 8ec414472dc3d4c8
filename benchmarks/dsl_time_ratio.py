"""The ratios of the rules that carry the draws' coverage over to the timed calls (DESIGN §5, "audits cannot be
told apart"), for honest submissions and for the audit-aware ones (the same kernel doing less work, or none,
when not audited): the evidence calls' median DSL time over the least DSL time of a correctness draw
(``_coverage.DSL_TIME_SHARE``), and the least of the work ratios (``_coverage.WORK_SHARE``: bytes the launches
changed, each output's share of elements still holding what a launch wrote; evidence calls' median over the
draws'), and the share of evidence calls whose launches were given another argument value than every draw gave
(``_coverage.FIXED_CALLS``: the fixed-arguments rule).

    python benchmarks/dsl_time_ratio.py --repeats 3            # cpu: the examples and tests/verifier/honest
    python benchmarks/dsl_time_ratio.py --extra DIR --repeats 1  # and every *.py in DIR (tirx; the problem from
                                                                 # a name's "p36", else p36)

Prints one line per verification and the distributions; each share must stay well below the honest ones' least,
and sits above the audit-aware cases' largest where its rule closes them.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
from pathlib import Path

from mkbsim.verifier import VerifierSession

ROOT = Path(__file__).resolve().parents[1]


def _named(path: Path) -> str:
    """The problem a case's ``# problem:`` header names (p36 without one), as ``test_honest.py`` reads it."""
    found = re.search(r"^# problem: (p\d+)$", path.read_text(), re.M)
    return found.group(1) if found else "p36"


EXAMPLES = ROOT / "examples" / "submissions"
ADVERSARIAL = ROOT / "tests" / "verifier" / "adversarial"
CASES = [
    (EXAMPLES / "p36_rmsnorm_tirx.py", "p36"),
    (EXAMPLES / "p28_fused_add_rmsnorm_tirx.py", "p28"),
    (EXAMPLES / "p25_kv_block_copy_tirx.py", "p25"),
    *((p, _named(p)) for p in sorted((ROOT / "tests" / "verifier" / "honest").glob("*.py"))),
]
#: The same kernel doing less work when not audited: fewer repeats (the DSL-time rule), no rows, one row, a loop
#: bound read from the data, a scratch output, an overwritten result (the work rule).
AUDIT_AWARE = [
    (ADVERSARIAL / name, "p36")
    for name in ("audit_aware_idle_kernel.py", "zero_work_no_rows.py", "zero_work_one_row.py",
                 "zero_work_bound_from_data.py", "zero_work_scratch_output.py", "zero_work_overwritten.py")
]  # fmt: skip


def _problem(path: Path) -> str:
    found = re.search(r"(?:^|_)(p\d\d)(?:_|\.|$)", path.name)
    return found.group(1) if found else "p36"


def _work_ratio(report: object) -> float | None:
    """The least of the work ratios the rule judged (an output share under its floor on the draws is not)."""
    work = getattr(report, "details", {}).get("timed_work") or {}
    ratios = [work["ratios"][k] for k in work.get("judged", []) if work["ratios"][k] is not None]
    return min(ratios) if ratios else None


def _marked(report: object) -> float | None:
    """The share of evidence calls the fixed-arguments rule marked (None where it did not run)."""
    found = getattr(report, "details", {}).get("timed_arguments")
    calls = getattr(report, "details", {}).get("evidence_calls", {}).get("ms") or []
    return len(found["calls_changed"]) / len(calls) if found and calls else None


def _ratios(
    session: VerifierSession, cases: list[tuple[Path, str]], repeats: int
) -> tuple[list[float], list[float], list[float]]:
    times: list[float] = []
    works: list[float] = []
    marks: list[float] = []
    for path, problem in cases:
        for _ in range(repeats):
            report = session.verify(path, problem, "tirx")
            ratio = (report.details.get("dsl_time") or {}).get("ratio")
            work = _work_ratio(report)
            why = "" if report.passed else f" ({report.feedback[:160]})"
            shortfall = (report.details.get("timed_work") or {}).get("float_shortfall")
            marked = _marked(report)
            print(f"{path.name} {problem}: passed={report.passed} failure={report.failure} ratio={ratio} "
                  f"work={work} shortfall={shortfall} marked={marked} plan={report.plan} "
                  f"load={os.getloadavg()[0]:.1f}{why}", file=sys.stderr)  # fmt: skip
            if marked is not None:
                marks.append(marked)
            if ratio is not None:
                times.append(ratio)
            if work is not None:
                works.append(work)
    return sorted(times), sorted(works), sorted(marks)


def _summary(name: str, ratios: list[float]) -> str:
    if not ratios:
        return f"{name}: no ratio measured"
    fifth, median = ratios[len(ratios) // 20], statistics.median(ratios)
    return (f"{name}: {len(ratios)} verifications: least {ratios[0]:.3f}, 5th percentile {fifth:.3f}, "
            f"median {median:.3f}, most {ratios[-1]:.3f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--extra", type=Path, help="a folder of further honest submissions")
    args = parser.parse_args()
    cases = CASES + ([(p, _problem(p)) for p in sorted(args.extra.glob("*.py"))] if args.extra else [])
    with VerifierSession("cpu") as session:
        honest = _ratios(session, cases, args.repeats)
        aware = _ratios(session, AUDIT_AWARE, args.repeats)
    for k, measure in enumerate(("DSL time", "work", "evidence calls marked by the fixed-arguments rule")):
        print(_summary(f"honest, {measure}", honest[k]))
        print(_summary(f"audit-aware, {measure}", aware[k]))


if __name__ == "__main__":
    main()
