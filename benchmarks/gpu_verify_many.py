"""On the GPU machine: many solution files through one warm verifier session, each also timed by do_bench.

    export PYTHONPATH=$PWD:/opt/dsl:/opt/dsl/nvidia_cutlass_dsl/dsl_packages CUDA_PATH=/usr/local/cuda
    python3 benchmarks/gpu_verify_many.py problems/mlp_norm/solutions/29_fused_*.py ... --out $OUT

For each file: `mkbsim verify --backend cuda --protocol paper --workload production` (or `--workload smoke`) in one warm
`VerifierSession` (one zygote start for the whole batch, instead of one per file as in gpu_solutions.sh),
its payload written to OUT/verdicts/<stem>.json; then, right after its verdict (a row is whole before the next one
starts: a budget spent mid-batch leaves no verdict without its times), a passed file is timed by
`triton.testing.do_bench` (L2 flushed between repetitions, median) on one production draw, and by the paper
protocol's call (synchronise, record, call, record, synchronise) in this plain process without the verifier:
`plain_ms` on that one draw, `plain_fresh_ms` on a fresh draw made before each call as the protocol does (the
verifier's cost of its own is verifier_ms less plain_fresh_ms; plain_ms less do_bench_ms is the host's Python
that the protocol counts and do_bench hides). One JSON line per file in OUT/do_bench.jsonl. Back here:
`python3 benchmarks/record_h200.py OUT/verdicts --do-bench OUT/do_bench.jsonl`, then
`python3 benchmarks/kernel_tables.py`. `--budget` seconds bounds the whole run: what is left when it is spent is
skipped and named; `--resume` continues such a run in a later call (same OUT on the warm machine's disk).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from pathlib import Path
from typing import Any


def _verify(session: Any, catalog: Any, path: Path, out: Path, workload: str) -> dict[str, Any]:
    """``path``'s verdict, written to OUT/verdicts/<stem>.json."""
    # a solution's stem starts with its number (01_...), an example's with its id (p36_...)
    number, dsl = path.stem.split("_")[0].removeprefix("p"), path.stem.rsplit("_", 1)[1]
    started = time.monotonic()
    try:
        report = session.verify(path, catalog.get(f"p{number}"), dsl, protocol="paper", workload=workload)
        payload: dict[str, Any] = report.to_payload(None, "final")
    except Exception as exc:  # a harness fault on one file must not lose the others' verdicts
        payload = {"passed": False, "failure": f"harness error: {type(exc).__name__}: {exc}"}
    (out / "verdicts" / f"{path.stem}.json").write_text(json.dumps(payload, indent=1))
    details = payload.get("details") or {}
    sol = (details.get("sol") or {}).get("fraction")
    twin = {k: v for k, v in (details.get("twin_draw") or {}).items() if k != "outputs"}
    print(f"{path.stem}: passed={payload.get('passed')} failure={payload.get('failure')} "
          f"runtime_ms={payload.get('runtime_ms')} sol={sol} twin={json.dumps(twin, default=str)} "
          f"({time.monotonic() - started:.1f} s)", flush=True)  # fmt: skip
    return payload


def _plain_windows(module: Any, problem: Any, inputs: Any) -> tuple[float, float]:
    """The paper protocol's call in this process (event ms, medians): on ``inputs``, and on a fresh draw a call."""
    from gpu_cold_host import paper_ms

    drawn = [inputs]
    seeds = iter(range(1000, 2000))

    def draw() -> None:
        drawn[0] = None  # the previous draw freed first, as the verifier's worker frees a timed call's inputs
        drawn[0] = problem.module.make_inputs(problem.workload, seed=next(seeds), device="cuda")

    plain, _ = paper_ms(lambda: module.run(*inputs), None)
    fresh, _ = paper_ms(lambda: module.run(*drawn[0]), draw)
    return plain, fresh


def _do_bench(catalog: Any, path: Path, verdict: dict[str, Any]) -> dict[str, Any]:
    """``path`` timed by do_bench and by the paper protocol's call in this plain process."""
    import triton.testing

    problem = catalog.get(f"p{path.stem.split('_')[0]}")
    spec = importlib.util.spec_from_file_location(f"solution_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    inputs = problem.module.make_inputs(problem.workload, seed=7, device="cuda")
    ms = float(triton.testing.do_bench(lambda m=module, x=inputs: m.run(*x), warmup=25, rep=100,
                                       return_mode="median"))  # fmt: skip
    plain, fresh = _plain_windows(module, problem, inputs)
    return {"file": path.name, "do_bench_ms": ms, "plain_ms": plain, "plain_fresh_ms": fresh,
            "verifier_ms": verdict["runtime_ms"], "ratio": verdict["runtime_ms"] / ms}  # fmt: skip


def _run(files: list[Path], out: Path, deadline: float, resume: bool, bench: bool, workload: str) -> None:
    from mkbsim.catalog import load_catalog
    from mkbsim.verifier import VerifierSession

    catalog = load_catalog()
    (out / "verdicts").mkdir(parents=True, exist_ok=True)
    bench_file = out / "do_bench.jsonl"
    benched = set()
    if resume and bench_file.exists():
        benched = {json.loads(line)["file"] for line in bench_file.read_text().splitlines() if line.strip()}
    with VerifierSession("cuda") as session, open(bench_file, "a" if resume else "w") as lines:
        for path in files:
            verdict_file = out / "verdicts" / f"{path.stem}.json"
            verdict = json.loads(verdict_file.read_text()) if resume and verdict_file.exists() else None
            if verdict is not None and (not bench or not verdict.get("passed") or path.name in benched):
                continue  # whole from an earlier run into the same folder
            if time.monotonic() > deadline:
                print(f"{path.stem}: skipped (budget spent)", flush=True)
                continue
            verdict = verdict or _verify(session, catalog, path, out, workload)
            if bench and verdict.get("passed"):
                row = _do_bench(catalog, path, verdict)
                lines.write(json.dumps(row) + "\n")
                lines.flush()
                print(row, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("/tmp/mkbsim-gpu"))
    parser.add_argument("--budget", type=float, default=480.0, help="seconds for the whole run")
    parser.add_argument("--no-do-bench", action="store_true")
    parser.add_argument("--workload", choices=("smoke", "production"), default="production",
                        help="the verification's workload (do_bench times a production draw either way)")  # fmt: skip
    parser.add_argument(
        "--resume",
        action="store_true",
        help="skip files OUT already holds a verdict (and do_bench line) for: a run spread over calls",
    )
    args = parser.parse_args()
    _run(args.files, args.out, time.monotonic() + args.budget, args.resume, not args.no_do_bench, args.workload)


if __name__ == "__main__":
    main()
