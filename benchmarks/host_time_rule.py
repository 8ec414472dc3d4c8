"""The scored calls' host work against the draws' eager operators' (``_judge.scored_host_time``, cpu), one line per
verification (verifier README, "rt23 F1-F8 on cpu at PRODUCTION"; RESULTS.md, "The scored calls' host time").

    .venv/bin/python benchmarks/host_time_rule.py --workload production \
        examples/submissions/p36_rmsnorm_tirx.py:p36 \
        tests/verifier/adversarial/eager_answer_keyed_on_an_input_p36.py:p36

Each line: the verdict, the scored median, its DSL-launch part, the eager reference's median, and the rule's figures
(``own_ms``: host work a scored call less the harness's; ``draws_eager_ms``: the draws' eager operators' own runs;
``allowed_ms``), or null where an earlier rule ended the verification.
"""

from __future__ import annotations

import argparse
import json
import os

from mkbsim.verifier import Limits, VerifierSession


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", help="FILE:PROBLEM")
    parser.add_argument("--workload", default="smoke", choices=("smoke", "production"))
    parser.add_argument("--protocol", default="hardened")
    parser.add_argument("--call-timeout", type=float, default=30.0, help="seconds (PRODUCTION's fits need more than 8)")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    limits = Limits(call_timeout_s=args.call_timeout, import_timeout_s=120.0, memory_bytes=4 << 30)
    with VerifierSession("cpu", limits=limits) as session:
        for case in args.cases:
            path, problem = case.rsplit(":", 1)
            report = session.verify(path, problem, "tirx", protocol=args.protocol, workload=args.workload)
            last = (report.details.get("timing_rounds") or [{}])[-1]
            line = {
                "case": os.path.basename(path), "passed": report.passed, "failure": report.failure,
                "plan": report.plan, "median_ms": last.get("median_ms"), "dsl_ms": last.get("dsl_median_ms"),
                "eager_ms": (report.details.get("eager") or {}).get("median_ms"),
                "host_time": report.details.get("host_time"),
                "feedback": None if report.passed else report.feedback[:400],
            }  # fmt: skip
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
