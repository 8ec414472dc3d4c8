"""Each verdict of a folder as the lead reads a cuda false-positive run (benchmarks/gpu_cuda_fp.sh): the verdict,
its failure, the seconds per phase, and every timing rule's value against its allowance.

    python3 benchmarks/cuda_fp_summary.py OUT/verdicts
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any


def _median(xs: list[float]) -> float | None:
    return float(statistics.median(xs)) if xs else None


def _num(x: Any, digits: int = 4) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def summary(payload: dict[str, Any]) -> list[str]:
    d = payload.get("details") or {}
    lines = [f"passed={payload.get('passed')} failure={payload.get('failure')} runtime_ms={payload.get('runtime_ms')}"]
    if not payload.get("passed"):
        lines.append(f"  feedback: {str(payload.get('feedback'))[:300]}")
    lines.append("  phases s: " + ", ".join(f"{k}={v:.1f}" for k, v in (d.get("overhead") or {}).items()))
    for i, r in enumerate(d.get("timing_rounds") or [], 1):
        lines.append(
            f"  round {i}: {r.get('failure')}  timed median {_num(r.get('median_ms'))} ms, evidence median "
            f"{_num(r.get('evidence_median_ms'))} ms (CPU {_num(r.get('cpu_median_ms'))} / "
            f"{_num(r.get('evidence_cpu_median_ms'))}), null CPU over {_num(r.get('null_cpu_over_ms'))}"
        )
    ev = d.get("evidence_calls") or {}
    if ev:
        spent = _median([w["ms"] for w in ev.get("work") or [] if w])
        watched = _median([ms - (w["ms"] if w else 0.0) for ms, w in zip(ev["ms"], ev.get("work") or [], strict=False)])
        launches = _median(ev.get("launches") or [])
        timed = (d.get("timing_rounds") or [{}])[-1].get("median_ms")
        per_launch = (watched - timed) / launches if watched is not None and timed is not None and launches else None
        lines.append(
            f"  evidence: median {_num(_median(ev['ms']))} ms, gate's own {_num(spent)} ms, less it "
            f"{_num(watched)} ms; launches {_num(launches)}; watching cost per launch {_num(per_launch)} ms "
            "(allowed 0.1 on cuda)"
        )
    rules = {
        "scored_time (scored >= floor)": ("scored_time", "scored_ms", "floor_ms"),
        "idle CPU (median <= limit)": ("idle_cpu", "median_ms", "limit_ms"),
        "dsl_time (ratio >= required)": ("dsl_time", "ratio", "required_ratio"),
    }
    for name, (key, value, line) in rules.items():
        found = d.get(key)
        if found:
            extra = f", reference {_num(found['reference_ms'])} ms" if "reference_ms" in found else ""
            extra += f", share of a core while waiting {_num(found['cpu_share'], 3)}" if "cpu_share" in found else ""
            lines.append(f"  {name}: {_num(found.get(value))} vs {_num(found.get(line))}{extra}")
    totals = d.get("block_totals")
    if totals:
        lines.append(
            f"  block totals: worst ratio {_num(max(totals['ratios'], default=None), 3)}, ratios "
            f"{totals['ratios']}, medians {totals.get('medians_ms')}"
        )
        lines.append(f"    worst block's calls (kind, cost less its median): {totals.get('worst_calls')}")
    if d.get("harness_gap_ms"):
        lines.append(f"  harness gap median {_num(_median(d['harness_gap_ms']))} ms; draw gaps {d.get('draw_gap_ms')}")
    eager = d.get("eager") or {}
    if eager.get("idle_cpu_ms"):
        lines.append(f"  eager reference's idle CPU per call: median {_num(_median(eager['idle_cpu_ms']))} ms")
    return lines


def main() -> None:
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        print("usage: cuda_fp_summary.py VERDICTS_DIR", file=sys.stderr)
        raise SystemExit(2)
    for path in sorted(Path(sys.argv[1]).glob("*.json")):
        print(f"== {path.stem}")
        print("\n".join(summary(json.loads(path.read_text()))))


if __name__ == "__main__":
    main()
