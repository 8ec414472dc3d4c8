"""What a scored call saves against a watched (evidence) call, on honest submissions and on the cases that behave
differently when watched (``_judge.scored_time``, ``_judge.scored_footprint``): per verification, the scored
calls' median cost against the evidence calls' (their CPU time less the gate's own time, ``_phases._call_costs``),
the evidence calls' launches, and the scored calls' median launch footprint against the evidence calls'.

    python benchmarks/evidence_margins.py --repeats 2                  # the examples and tests/verifier/honest
    python benchmarks/evidence_margins.py --only evidence_aware        # the adversarial cases of that name

Prints one JSON line per verification, then each group's distribution of the ratio scored / watched (an honest
plan's ratio sits near 1; the rule's floor is ``1 - EVIDENCE_NOISE`` less the per-call and per-launch costs).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
from pathlib import Path
from typing import Any

from mkbsim.verifier import VerifierSession

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "submissions"
HONEST = [
    EXAMPLES / "p36_rmsnorm_tirx.py",
    EXAMPLES / "p28_fused_add_rmsnorm_tirx.py",
    EXAMPLES / "p25_kv_block_copy_tirx.py",
    *sorted((ROOT / "tests" / "verifier" / "honest").glob("*.py")),
]
ADVERSARIAL = ROOT / "tests" / "verifier" / "adversarial"


def _problem(path: Path) -> str:
    text = path.read_text()
    named = re.search(r"^# problem: (p\d+)$", text, re.M) or re.search(r"(?:^|_)(p\d\d)(?:_|\.|$)", path.name)
    return named.group(1) if named else "p36"


def _figures(path: Path, report: Any) -> dict[str, Any]:
    d = report.details
    scored, evidence = d.get("scored_time") or {}, d.get("evidence_calls") or {}
    launches = statistics.median(evidence["launches"]) if evidence.get("launches") else None
    found: dict[str, Any] = {"case": path.stem, "passed": report.passed, "failure": report.failure,
                             "launches": launches}  # fmt: skip
    if scored:
        found |= {k: round(v, 4) for k, v in scored.items() if isinstance(v, float)}
        found["ratio"] = round(scored["scored_ms"] / scored["watched_ms"], 3) if scored["watched_ms"] > 0 else None
        if launches:
            found["saved_per_launch_ms"] = round((scored["watched_ms"] - scored["scored_ms"]) / launches, 4)
    if evidence.get("footprints") and evidence.get("scored_footprint") is not None:
        found["footprint_ratio"] = round(evidence["scored_footprint"] / statistics.median(evidence["footprints"]), 3)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--only", help="the adversarial cases whose name holds this, instead of the honest ones")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    cases = sorted(p for p in ADVERSARIAL.glob("*.py") if args.only in p.name) if args.only else HONEST
    ratios: list[float] = []
    with VerifierSession("cpu") as session:
        for path in cases:
            for _ in range(args.repeats):
                found = _figures(path, session.verify(path, _problem(path), "tirx"))
                print(json.dumps(found), flush=True)
                if found.get("ratio") is not None:
                    ratios.append(found["ratio"])
    if ratios:
        print(f"ratio scored/watched: n={len(ratios)} min={min(ratios):.3f} median={statistics.median(ratios):.3f} "
              f"max={max(ratios):.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
