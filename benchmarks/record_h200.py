"""Merge `mkbsim verify --json` verdicts from an H200 run into benchmarks/h200_measurements.json.

    python3 benchmarks/record_h200.py DIR [DIR ...]

    python3 benchmarks/record_h200.py DIR --harness gpu_kernels.jsonl
    python3 benchmarks/record_h200.py DIR --do-bench do_bench.jsonl --date 2026-12-01

DIR holds `<solution stem>.json` verdicts as written by benchmarks/gpu_solutions.sh. Each passed verdict
replaces (or adds) the row of its solution file: verifier_ms and eager_ms from the verdict; the file leaves
`not_measured`. `--harness` adds harness_ms / harness_eager_ms from benchmarks/gpu_kernels.py's JSON lines
(passed solutions and the eager reference of the same run); a row keeps its earlier harness timings
otherwise. `--do-bench` adds do_bench_ms (`triton.testing.do_bench` on the same kernel, from
benchmarks/gpu_verify_many.py) and, where that run measured them, plain_ms / plain_fresh_ms (the paper protocol's call
in a plain process, on one draw / a fresh draw a call). Each row carries the date of the run that measured it
(`--date`, default today, UTC). Failed verdicts are listed, not stored. Then benchmarks/kernel_tables.py regenerates
the tables.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("h200_measurements.json")


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verified_file(tree: Path, stem: str) -> Path:
    """The solution file the verdict is about, in the checkout the GPU run verified."""
    found = sorted(tree.glob(f"problems/*/solutions/{stem}.py"))
    if len(found) != 1:
        raise ValueError(f"{stem}: {len(found)} files named {stem}.py under {tree}/problems/*/solutions")
    return found[0]


def row_of(stem: str, verdict: dict[str, Any], date: str, sha256: str) -> dict[str, Any]:
    number, _, rest = stem.partition("_")
    plan, _, dsl = rest.rpartition("_")
    if verdict["problem"] != f"p{number}" or verdict["dsl"] != dsl:
        raise ValueError(f"{stem}: the verdict is for {verdict['problem']} {verdict['dsl']}")
    return {"file": f"{stem}.py", "problem": verdict["problem"], "dsl": dsl, "plan": plan,
            "verifier_ms": round(verdict["runtime_ms"], 4), "eager_ms": round(verdict["eager_ms"], 4),
            "date": date, "sha256": sha256}  # fmt: skip


def merge(data: dict[str, Any], verdicts: dict[str, dict[str, Any]], date: str, tree: Path) -> list[str]:
    """Update ``data`` in place; returns the stems that failed (not stored).

    Each row keeps the SHA-256 of the file as verified (from ``tree``, the checkout the GPU run used), so
    kernel_tables.py can tell a measurement from a file that changed after it."""
    rows = {row["file"]: row for row in data["rows"]}
    pending = data.get("not_measured", {})  # files not measured yet, with the reason
    failed = []
    for stem, verdict in sorted(verdicts.items()):
        if not verdict.get("passed"):
            failed.append(f"{stem}: {verdict.get('failure')}")
            continue
        new = row_of(stem, verdict, date, file_sha256(verified_file(tree, stem)))
        old = rows.get(new["file"], {})
        rows[new["file"]] = {**new, **{k: v for k, v in old.items() if k.startswith("harness")}}
        pending.pop(new["file"], None)
    data["rows"] = sorted(rows.values(), key=lambda r: r["file"])
    return failed


def merge_harness(data: dict[str, Any], lines: list[dict[str, Any]]) -> int:
    """Add the harness timings of passed solutions (and their problem's eager run); returns rows updated."""
    eager = {r["problem"]: r["ms"] for r in lines if r.get("kind") == "eager"}
    solutions = {r["file"]: r for r in lines if r.get("kind") == "solution" and r.get("passed")}
    updated = 0
    for row in data["rows"]:
        run = solutions.get(row["file"])
        if run is not None and row["problem"] in eager:
            row["harness_ms"], row["harness_eager_ms"] = round(run["ms"], 4), round(eager[row["problem"]], 4)
            updated += 1
    return updated


BENCH_FIELDS = ("do_bench_ms", "plain_ms", "plain_fresh_ms")


def merge_do_bench(data: dict[str, Any], lines: list[dict[str, Any]]) -> int:
    """Add do_bench medians of the same kernels (same run as their verdicts), and the plain process's paper-protocol
    windows where the run measured them; returns rows updated."""
    bench = {r["file"]: r for r in lines if "do_bench_ms" in r}
    updated = 0
    for row in data["rows"]:
        if row["file"] in bench:
            for field in BENCH_FIELDS:
                row.pop(field, None)  # no figure of an earlier run stays beside this run's
                if bench[row["file"]].get(field) is not None:
                    row[field] = round(bench[row["file"]][field], 4)
            updated += 1
    return updated


def dump(data: dict[str, Any]) -> str:
    """The file's layout: the header indented, one row per line (diffs show which solution changed)."""
    head = {k: v for k, v in data.items() if k != "rows"}
    rows = ",\n".join("    " + json.dumps(row) for row in data["rows"])
    return json.dumps(head, indent=2)[:-2] + ',\n  "rows": [\n' + rows + "\n  ]\n}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--harness", type=Path, help="gpu_kernels.jsonl of benchmarks/gpu_kernels.py")
    parser.add_argument("--do-bench", type=Path, help="do_bench.jsonl of benchmarks/gpu_verify_many.py")
    parser.add_argument("--date", default=datetime.now(UTC).date().isoformat(), help="the run's date")
    parser.add_argument("--tree", type=Path, default=DATA.parents[1],
                        help="the checkout whose solution files the GPU run verified (default: this one)")  # fmt: skip
    args = parser.parse_args()
    verdicts: dict[str, dict[str, Any]] = {}
    for directory in args.dirs:
        for path in directory.glob("*.json"):
            try:
                verdicts[path.stem] = json.loads(path.read_text())
            except ValueError:
                print(f"{path}: not a verdict (see {path.stem}.err)", file=sys.stderr)
    data = json.loads(DATA.read_text())
    failed = merge(data, verdicts, args.date, args.tree)
    print(f"{len(verdicts) - len(failed)} rows recorded in {DATA.name}; now run benchmarks/kernel_tables.py")
    if args.harness is not None:
        lines = [json.loads(line) for line in args.harness.read_text().splitlines() if line.strip()]
        print(f"harness timings for {merge_harness(data, lines)} rows")
    if args.do_bench is not None:
        lines = [json.loads(line) for line in args.do_bench.read_text().splitlines() if line.strip()]
        print(f"do_bench timings for {merge_do_bench(data, lines)} rows")
    DATA.write_text(dump(data))
    for line in failed:
        print(f"not recorded: {line}")


if __name__ == "__main__":
    main()
