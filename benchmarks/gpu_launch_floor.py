"""The per-call floor of a DSL solution under the paper protocol, and which measured rows it caps below target.

On the GPU machine (DSLs staged as ../shared/gpu/README.md says), from the repository root:

    export PYTHONPATH=$PWD:/opt/dsl:/opt/dsl/nvidia_cutlass_dsl/dsl_packages CUDA_PATH=/usr/local/cuda
    python3 benchmarks/gpu_launch_floor.py --out $OUT            # ~1 min: floors + the table

Anywhere, on floors measured before (the table only):

    .venv/bin/python benchmarks/gpu_launch_floor.py --floors OUT/launch_floor.json

A call of a solution that does no work (benchmarks/gpu_launch_floor_kernels.py: `torch.empty_like` and
one launch of a one-warp kernel writing one element, in each DSL, called as the solutions call theirs)
is timed three ways: by the verifier's own timer (`mkbsim.verifier._timing.timer_vault` and
`timed_call`, the code that times every verified call: synchronise, start event, call, end event,
event synchronise; 10 warm-up and 50 timed calls, median), by `triton.testing.do_bench` (median), and,
for the verifier's timer only, with a call that launches nothing (the verifier's null calls) and with
two launches (the cost of each further launch). As an anchor through the whole verifier (worker,
guards, launch counter): p26's solutions, whose speed of light is 0.1 µs, verified with
`VerifierSession("cuda")` under the paper protocol at the production workload: their medians and
the median of the verifier's own null calls in those runs. DESIGN §5.

The table then puts every row of h200_measurements.json against its DSL's floor: SOL fraction = the
cost model's time at the h200 profile / the verifier's median (as benchmarks/kernel_tables.py), and
attainable = sol / (sol + floor), the fraction a kernel running at speed of light would still show;
a row whose attainable fraction is below its target (0.8 memory-bound, 0.5 compute-bound) cannot
reach it under this protocol, however fast its kernel. Results: OUT/launch_floor.json and
OUT/launch_floor.md (also printed).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DSLS = ("tirx", "cutedsl")
TARGETS = {"memory": 0.8, "compute": 0.5}  # issue "Speed": median SOL fraction per bound
WARMUP, TIMED = 10, 50  # the paper protocol's warm-up and timed calls
DATA = Path(__file__).with_name("h200_measurements.json")


def _sibling(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)  # dataclasses resolve their module's annotations through sys.modules
    spec.loader.exec_module(module)
    return module


# --- on the GPU ---------------------------------------------------------------------------------------
def verifier_timer(device_type: str = "cuda") -> Callable[[Callable[[], object]], float]:
    """A function timing one call exactly as the verifier's worker does (stream sync, paper protocol)."""
    from mkbsim.verifier import _control
    from mkbsim.verifier._timing import timed_call, timer_layout, timer_lib, timer_vault

    page = bytearray(_control.HEADER_BYTES)
    vault = timer_vault(page, timer_lib(device_type, "stream"), timer_layout())
    next(vault)
    nonce = [0]

    def timed(fn: Callable[[], object]) -> float:
        nonce[0] += 1
        _control.put(page, _control.NONCE, nonce[0])
        timed_call(fn, (), _timer=vault.send, _clock=time.perf_counter)
        return float(_control.get(page, _control.CALL_MS))

    return timed


def paper_ms(timed: Callable[[Callable[[], object]], float], fn: Callable[[], object]) -> float:
    """Median of the protocol's timed calls after its warm-up calls."""
    for _ in range(WARMUP):
        timed(fn)
    return statistics.median(timed(fn) for _ in range(TIMED))


ANCHORS = ("problems/kv_cache/solutions/26_fused_cutedsl.py", "problems/kv_cache/solutions/26_fused_tirx.py")


def verifier_anchors() -> list[dict[str, Any]]:
    """p26's solutions (speed of light 0.1 µs) through the whole verifier: what its path adds to a tiny call."""
    from mkbsim.verifier import VerifierSession

    out = []
    with VerifierSession("cuda") as session:
        for name in ANCHORS:
            path = Path(__file__).resolve().parents[1] / name
            dsl = path.stem.rsplit("_", 1)[1]
            report = session.verify(path, "p26", dsl, protocol="paper", workload="production")
            nulls = report.details.get("timing", {}).get("null_ms") or [float("nan")]
            out.append({"file": path.name, "passed": report.passed, "runtime_ms": report.runtime_ms,
                        "null_ms": statistics.median(nulls), "failure": report.failure})  # fmt: skip
            print(f"verifier anchor: {out[-1]}", file=sys.stderr, flush=True)
    return out


def measure_floors() -> dict[str, Any]:
    """The floors of both DSLs on this GPU (see the module docstring)."""
    import torch
    import triton.testing

    kernels = _sibling("gpu_launch_floor_kernels")
    timed = verifier_timer()
    x = torch.tensor([41], dtype=torch.int32, device="cuda")
    out: dict[str, Any] = {"device": torch.cuda.get_device_name(0), "null_ms": paper_ms(timed, lambda: None)}
    for dsl in DSLS:
        y = kernels.run(dsl, x)  # compiles; its answer proves the kernel ran
        torch.cuda.synchronize()
        if int(y.item()) != 42:
            raise RuntimeError(f"the {dsl} one-element kernel wrote {int(y.item())}, not 42")
        one = paper_ms(timed, lambda d=dsl: kernels.run(d, x))
        two = paper_ms(timed, lambda d=dsl: kernels.run(d, x, 2))
        bench = float(triton.testing.do_bench(lambda d=dsl: kernels.run(d, x), warmup=25, rep=100,
                                              return_mode="median"))  # fmt: skip
        out[dsl] = {"paper_ms": one, "do_bench_ms": bench, "extra_launch_ms": two - one}
        print(f"{dsl}: {out[dsl]}", file=sys.stderr, flush=True)
    out["verifier_anchors"] = verifier_anchors()
    return out


# --- anywhere -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FloorRow:
    """One measured solution file against its DSL's floor."""

    file: str
    dsl: str
    bound: str
    sol_ms: float
    runtime_ms: float
    floor_ms: float

    @property
    def sol_fraction(self) -> float:
        return self.sol_ms / self.runtime_ms

    @property
    def attainable(self) -> float:
        return attainable(self.sol_ms, self.floor_ms)

    @property
    def capped(self) -> bool:
        """The floor alone keeps this row below its bound's target."""
        return self.attainable < TARGETS[self.bound]


def attainable(sol_ms: float, floor_ms: float) -> float:
    """The SOL fraction of a kernel at speed of light that still pays the per-call floor."""
    return sol_ms / (sol_ms + floor_ms)


def floor_rows(floors: dict[str, Any], data: dict[str, Any]) -> list[FloorRow]:
    """Every measured row of ``data`` (h200_measurements.json) with its DSL's paper-protocol floor."""
    from mkbsim.catalog import load_catalog
    from mkbsim.verifier._devices import profiles, speed_of_light

    h200 = {key: value for key, value in profiles()["h200"].items() if key != "cache_bytes"}  # as kernel_tables
    catalog = {p.id: p for p in load_catalog()}
    out = []
    for row in data["rows"]:
        problem = catalog[row["problem"]]
        sol = speed_of_light(problem.cost(problem.workload), h200)
        out.append(FloorRow(row["file"], row["dsl"], sol["bound"], sol["sol_ms"], row["verifier_ms"],
                            floors[row["dsl"]]["paper_ms"]))  # fmt: skip
    return sorted(out, key=lambda r: (r.bound, r.sol_ms, r.file))


def _us(ms: float | None) -> str:
    return "-" if ms is None else f"{ms * 1e3:.1f}"


def render(floors: dict[str, Any], rows: list[FloorRow]) -> str:
    """The floors and the per-row table, in markdown."""
    lines = [
        f"Per-call floor on {floors['device']} (verifier's timer, paper protocol; do_bench beside): "
        f"null call {floors['null_ms'] * 1e3:.1f} µs; "
        + "; ".join(
            f"{dsl} {floors[dsl]['paper_ms'] * 1e3:.1f} µs (do_bench {floors[dsl]['do_bench_ms'] * 1e3:.1f} µs, "
            f"+{floors[dsl]['extra_launch_ms'] * 1e3:.1f} µs a further launch)"
            for dsl in DSLS
        ),
        *(
            f"Through the verifier: {a['file']} (SOL 0.1 µs) {_us(a['runtime_ms'])} µs, the verifier's null calls "
            f"{_us(a['null_ms'])} µs (passed: {a['passed']})"
            for a in floors.get("verifier_anchors", [])
        ),
        "",
        "| solution file | bound | SOL µs | runtime µs | SOL fraction | floor µs | attainable | target reachable |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.file} | {r.bound} | {r.sol_ms * 1e3:.1f} | {r.runtime_ms * 1e3:.1f} | {r.sol_fraction:.2f} "
            f"| {r.floor_ms * 1e3:.1f} | {r.attainable:.2f} | {'no' if r.capped else 'yes'} |"
        )
    for bound, target in TARGETS.items():
        mine = [r for r in rows if r.bound == bound]
        if mine:
            median_sol = statistics.median(r.sol_fraction for r in mine)
            lines.append(
                f"\n{bound}-bound: {len(mine)} rows, median SOL fraction {median_sol:.2f}, "
                f"median attainable {statistics.median(r.attainable for r in mine):.2f}; "
                f"{sum(r.capped for r in mine)} cannot reach {target} whatever the kernel"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="on the GPU: measure the floors, write OUT/launch_floor.{json,md}")
    parser.add_argument("--floors", type=Path, help="a launch_floor.json measured before: the table only")
    args = parser.parse_args(argv)
    if (args.out is None) == (args.floors is None):
        parser.error("give exactly one of --out (measure on the GPU) and --floors (table from a measured file)")
    if args.floors is not None:
        try:
            floors = json.loads(args.floors.read_text())
        except (OSError, ValueError) as err:
            print(f"cannot read floors from {args.floors}: {err}", file=sys.stderr)
            return 2
    else:
        floors = measure_floors()
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "launch_floor.json").write_text(json.dumps(floors, indent=1))
    missing = [dsl for dsl in DSLS if "paper_ms" not in floors.get(dsl, {})]
    if missing or "null_ms" not in floors:
        print(f"floors lack {missing or ['null_ms']}: not a launch_floor.json", file=sys.stderr)
        return 2
    table = render(floors, floor_rows(floors, json.loads(DATA.read_text())))
    if args.out is not None:
        (args.out / "launch_floor.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
