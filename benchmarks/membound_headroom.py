"""Which memory-bound reference kernels can still lift the median SOL fraction toward 0.8, and by how much.

    .venv/bin/python benchmarks/membound_headroom.py            # the table, from h200_measurements.json

Every memory-bound row of h200_measurements.json (classes as benchmarks/gpu_launch_floor.py's) with its SOL,
verifier and do_bench times, bytes moved, and the per-call floor of its DSL. The floor is read off the
records themselves, not from a separate run: the smallest (verifier − SOL) over that DSL's memory-bound
rows is an upper bound on what one call costs beyond its bytes (launch, the verifier's fixed per-call
cost), because no kernel moves its bytes faster than SOL. A row is *capped* when a kernel at the best
streaming rate measured among the rows (``BEST_STREAM``: the top SOL fraction, minus that floor) plus the
floor still misses 0.8: no kernel can reach the target there. The other rows below 0.8 have *kernel
headroom*; they are ranked by the speedup they need, and the median is recomputed as each is lifted to
0.8 in that order (each lift moves the median by at most one rank).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("h200_measurements.json")
TARGET = 0.8  # the memory-bound median target
LARGE = 20  # floors: a row this many floors long shows its kernel's streaming rate


def _sibling(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)  # dataclasses resolve their module's annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Row:
    """One memory-bound measured file."""

    file: str
    problem: str
    dsl: str
    full: bool  # all of the operator's work in DSL kernels (else a partial plan)
    sol_ms: float
    verifier_ms: float
    do_bench_ms: float | None
    bytes_moved: int
    date: str  # when the verifier measured it (the records' date where the row has none)

    @property
    def fraction(self) -> float:
        return self.sol_ms / self.verifier_ms

    def needed_speedup(self) -> float:
        """verifier time / the time that would score TARGET."""
        return self.verifier_ms * TARGET / self.sol_ms


def memory_rows(data: dict[str, Any]) -> list[Row]:
    """The measured memory-bound files (classes as gpu_launch_floor's), with the problem's bytes moved."""
    from mkbsim.catalog import load_catalog
    from mkbsim.verifier._devices import profiles, speed_of_light

    tables = _sibling("kernel_tables")
    h200 = {key: value for key, value in profiles()["h200"].items() if key != "cache_bytes"}  # as kernel_tables
    catalog = {p.id: p for p in load_catalog()}
    out = []
    for rec in tables.records(tables.solution_files(), data):
        problem = catalog[rec.problem]
        cost = problem.cost(problem.workload)
        if rec.row is None or speed_of_light(cost, h200)["bound"] != "memory":
            continue
        out.append(Row(rec.file, rec.problem, rec.dsl, rec.full, rec.sol_ms, rec.row["verifier_ms"],
                       rec.row.get("do_bench_ms"), cost.bytes, rec.row.get("date", data["date"])))  # fmt: skip
    return out


def best_per_problem(rows: list[Row]) -> list[Row]:
    """The fastest full plan of each (problem, DSL): what the median reads if superseded plans are left out."""
    best: dict[tuple[str, str], Row] = {}
    for r in rows:
        key = (r.problem, r.dsl)
        if r.full and (key not in best or r.fraction > best[key].fraction):
            best[key] = r
    return list(best.values())


def dsl_floors(rows: list[Row]) -> dict[str, float]:
    """Per DSL, the smallest verifier − SOL: an upper bound on a call's cost beyond moving its bytes."""
    floors: dict[str, float] = {}
    for r in rows:
        floors[r.dsl] = min(floors.get(r.dsl, float("inf")), max(r.verifier_ms - r.sol_ms, 0.0))
    return floors


def best_kernel_ms(row: Row, floor_ms: float, best_stream: float) -> float:
    """The fastest this row's call can be: its bytes at the best measured streaming rate, plus the floor."""
    return row.sol_ms / best_stream + floor_ms


def best_stream_rate(rows: list[Row], floors: dict[str, float]) -> float:
    """The highest SOL fraction a kernel reached once its DSL's floor is taken off its call, over rows whose
    SOL is at least LARGE floors (where the floor's estimate barely moves it; the floor's own rows would
    read 1.0 by construction)."""
    return max(r.sol_ms / (r.verifier_ms - floors[r.dsl]) for r in rows if r.sol_ms >= LARGE * floors[r.dsl])


def lift_path(rows: list[Row], headroom: list[Row]) -> list[tuple[Row, float]]:
    """The median after lifting each headroom row to TARGET, cumulatively, in the given order."""
    fractions = {r.file: r.fraction for r in rows}
    path = []
    for r in headroom:
        fractions[r.file] = TARGET
        path.append((r, statistics.median(fractions.values())))
    return path


def _table_row(r: Row, reachable: float, kind: str) -> str:
    name = r.file if r.full else f"{r.file} (partial plan)"
    bench = "-" if r.do_bench_ms is None else f"{r.do_bench_ms * 1e3:.1f}"
    by_bench = "-" if r.do_bench_ms is None else f"{r.sol_ms / r.do_bench_ms:.3f}"
    return (
        f"| {name} | {r.sol_ms * 1e3:.1f} | {r.verifier_ms * 1e3:.1f} | {bench} | {r.bytes_moved / 1e6:.1f} "
        f"| {r.fraction:.3f} | {by_bench} | {reachable:.2f} | {kind} | {r.date} |"
    )


def render(rows: list[Row], floor_ms: float | None = None) -> str:
    """The table; ``floor_ms`` replaces the floor read off the records (a verifier whose fixed cost is known)."""
    floors = dsl_floors(rows)
    stream = min(best_stream_rate(rows, floors), 1.0)
    source = "min verifier − SOL over the DSL's rows"
    if floor_ms is not None:
        floors, source = {dsl: floor_ms for dsl in floors}, "given"
    lines = [
        f"{len(rows)} memory-bound rows, median SOL fraction {statistics.median(r.fraction for r in rows):.3f}; "
        f"per-call floor ({source}): "
        + ", ".join(f"{dsl} {ms * 1e3:.1f} µs" for dsl, ms in sorted(floors.items()))
        + f"; best streaming rate reached {stream:.3f} of SOL",
        "",
        "| solution file | SOL µs | verifier µs | do_bench µs | MB moved | SOL fraction | by do_bench | best reachable "
        "| class | measured |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    kinds: dict[str, list[Row]] = {"at target": [], "capped": [], "headroom": []}
    for r in sorted(rows, key=lambda r: r.fraction):
        reachable = r.sol_ms / best_kernel_ms(r, floors[r.dsl], stream)
        kind = "at target" if r.fraction >= TARGET else "capped" if reachable < TARGET else "headroom"
        kinds[kind].append(r)
        lines.append(_table_row(r, reachable, kind))
    capped, headroom = kinds["capped"], sorted(kinds["headroom"], key=Row.needed_speedup)
    lines += [
        "",
        f"{len(capped)} capped (no kernel reaches {TARGET}), {len(headroom)} with kernel headroom. "
        f"Lifting the headroom rows to {TARGET}, easiest (smallest speedup needed) first:",
        "",
        "| # | solution file | speedup needed | median after |",
        "|---|---|---|---|",
    ]
    for i, (r, median) in enumerate(lift_path(rows, headroom), 1):
        lines.append(f"| {i} | {r.file} | {r.needed_speedup():.2f}× | {median:.3f} |")
    median = statistics.median(r.fraction for r in rows)
    oldest = min(r.date for r in rows)
    stale = [r.file for r in headroom if r.date == oldest and r.fraction < median]
    lines.append(
        f"\nHeadroom rows below the median still measured on {oldest} (the oldest verifier in the records; "
        f"re-measure before rewriting): {len(stale)}: {', '.join(stale)}."
    )
    best = best_per_problem(rows)
    lines.append(
        f"\nThe fastest full plan per (problem, DSL) only ({len(best)} rows, superseded and partial plans left out): "
        f"median SOL fraction {statistics.median(r.fraction for r in best):.3f}."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="an h200_measurements.json")
    parser.add_argument("--floor-us", type=float, help="the per-call floor in µs (default: read off the records)")
    args = parser.parse_args(argv)
    if args.floor_us is not None and args.floor_us < 0:
        parser.error("--floor-us must be >= 0")
    try:
        data = json.loads(args.data.read_text())
    except (OSError, ValueError) as err:
        print(f"cannot read {args.data}: {err}", file=sys.stderr)
        return 2
    print(render(memory_rows(data), None if args.floor_us is None else args.floor_us / 1e3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
