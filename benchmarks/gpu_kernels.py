"""Build, check and time every DSL solution under problems/*/solutions/ on the GPU, in one call.

Run on the GPU machine from the repository root, after the DSLs are staged (benchmarks/gpu_pack.py):

    export PYTHONPATH=$PWD:/opt/dsl:/opt/dsl/nvidia_cutlass_dsl/dsl_packages CUDA_PATH=/usr/local/cuda
    python3 benchmarks/gpu_kernels.py --out $OUT            # everything
    python3 benchmarks/gpu_kernels.py --only p36,p28 --out $OUT

Each solution (and each problem's eager reference) runs in its own child process, so a kernel that
faults cannot poison the CUDA context of the others. A child:
  1. loads the problem module (problems/<family>/NN_*.py) and the solution file;
  2. checks correctness on `--draws` fresh draws of the production WORKLOAD, with the verifier's rule
     (DESIGN §5): anchor = reference on float64 copies of the float16/bfloat16/float32 inputs;
     allowance = 3 · max(ref_error, eps(out dtype) · max|anchor|); INPLACE inputs compared after the
     call; integer outputs exact; NaN fails;
  3. times 10 warm-up + 50 timed calls, each on fresh inputs, end to end (synchronize, record, call,
     record, synchronize) with CUDA events — the `paper` protocol; then the same with a 256 MiB L2
     flush before each timed call (`flushed` column, closer to the `hardened` protocol);
  4. re-checks the output of the last timed call.
Speed of light = max(bytes / 4.3 TB/s, Σ flops[c] / peak[c]) from the problem's cost(WORKLOAD), with
the H200 ceilings measured here (copy 4.3 TB/s, bf16 790 TFLOP/s) and the datasheet fp32 67 TFLOP/s.
Results: one JSON object per line in OUT/gpu_kernels.jsonl and a markdown table in OUT/gpu_kernels.md
(also printed). The parent keeps a wall-clock budget (`--budget`, seconds) and skips what is left.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SOLUTION_RE = re.compile(r"^(\d{2,3})_([a-z0-9]+(?:_[a-z0-9]+)*)_(cutedsl|tirx)\.py$")
PEAKS = {"bytes": 4.3e12, "fp32": 67e12, "bf16": 790e12, "fp8": 1580e12, "fp4": 1580e12, "int": 67e12}
WARMUP, TIMED = (int(v) for v in os.environ.get("MKBSIM_BENCH_ITERS", "10,50").split(","))
#: only for a dry run of this script's logic on a machine without a GPU (the DSL kernels need CUDA)
DEVICE = os.environ.get("MKBSIM_BENCH_DEVICE", "cuda")


# ------------------------------------------------------------------------------------------------
# discovery
# ------------------------------------------------------------------------------------------------


def problem_path(number: int) -> Path:
    hits = sorted(ROOT.glob(f"problems/*/{number:02d}_*.py"))
    if len(hits) != 1:
        raise FileNotFoundError(f"problem {number:02d}: expected one module, found {hits}")
    return hits[0]


def solutions(only: set[int] | None, plans: set[str] | None = None) -> list[tuple[int, str, str, Path]]:
    """(problem number, plan, dsl, path) of every solution file (of the given plans), sorted."""
    found = []
    for path in sorted(ROOT.glob("problems/*/solutions/*.py")):
        m = SOLUTION_RE.match(path.name)
        if not m:
            continue
        num = int(m.group(1))
        if (only is None or num in only) and (plans is None or m.group(2) in plans):
            found.append((num, m.group(2), m.group(3), path))
    return found


# ------------------------------------------------------------------------------------------------
# child: correctness and timing (imports torch and the DSLs only here)
# ------------------------------------------------------------------------------------------------


def _load(path: Path, name: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _seed() -> int:
    return random.SystemRandom().getrandbits(63)


def _clone(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    import torch

    return tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)


def _outputs(problem: Any, fn: Any, inputs: tuple[Any, ...]) -> list[Any]:
    out = fn(*inputs)
    outs = list(out) if isinstance(out, tuple) else [out]
    names = list(problem.inputs)
    return outs + [inputs[names.index(n)] for n in problem.inplace]


def _compare(cand: list[Any], ref: list[Any], anchor: list[Any]) -> tuple[bool, str, float]:
    """The verifier's rule; returns (passed, detail, worst error / allowance)."""
    import torch

    if len(cand) != len(anchor):
        return False, f"{len(cand)} outputs, expected {len(anchor)}", float("inf")
    worst = 0.0
    for i, (c, r, a) in enumerate(zip(cand, ref, anchor, strict=True)):
        if not isinstance(c, torch.Tensor):
            return False, f"output {i} is {type(c).__name__}, not a tensor", float("inf")
        if c.shape != r.shape or c.dtype != r.dtype or c.device != r.device:
            return False, f"output {i}: {tuple(c.shape)} {c.dtype} {c.device}, expected {tuple(r.shape)} {r.dtype}", 1e9
        if not (r.dtype.is_floating_point):
            if not torch.equal(c, r):
                return False, f"output {i}: integer output differs", float("inf")
            continue
        c64, r64, a64 = c.double(), r.double(), a.double()
        if torch.isnan(c64).any():
            return False, f"output {i}: NaN", float("inf")
        err = (c64 - a64).abs().max().item()
        ref_err = (r64 - a64).abs().max().item()
        eps = torch.finfo(c.dtype).eps
        allowance = 3 * max(ref_err, eps * a64.abs().max().item())
        ratio = err / allowance if allowance > 0 else (0.0 if err == 0 else float("inf"))
        worst = max(worst, ratio)
        if err > allowance:
            return (
                False,
                f"output {i}: max error {err:.3e} > allowance {allowance:.3e} (ref error {ref_err:.3e})",
                ratio,
            )
    return True, "", worst


def _check(problem: Any, fn: Any, seed: int) -> tuple[bool, str, float]:
    from mkbsim.catalog import anchor_inputs

    inputs = problem.make_inputs(problem.workload, seed=seed, device=DEVICE)
    anchor = _outputs(problem, problem.reference, anchor_inputs(_clone(inputs)))
    ref = _outputs(problem, problem.reference, _clone(inputs))
    cand = _outputs(problem, fn, _clone(inputs))
    return _compare(cand, ref, anchor)


def _time(problem: Any, fn: Any, flush: bool) -> list[float]:
    import torch

    scratch = torch.empty(256 * 2**20, dtype=torch.uint8, device=DEVICE) if flush else None
    cuda = DEVICE == "cuda"
    times = []
    for i in range(WARMUP + TIMED):
        inputs = problem.make_inputs(problem.workload, seed=_seed(), device=DEVICE)
        if scratch is not None:
            scratch.zero_()  # evict the freshly generated inputs from the 60 MB L2
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            fn(*inputs)
            end.record()
            torch.cuda.synchronize()
            elapsed = start.elapsed_time(end)
        else:
            t = time.perf_counter()
            fn(*inputs)
            elapsed = (time.perf_counter() - t) * 1e3
        if i >= WARMUP:
            times.append(elapsed)
    return times


def child(kind: str, number: int, solution: str | None, draws: int) -> dict[str, Any]:
    import torch

    from mkbsim.catalog import load_problem

    problem = load_problem(problem_path(number))
    row: dict[str, Any] = {"problem": problem.id, "name": problem.name, "kind": kind}
    t0 = time.perf_counter()
    if kind == "eager":
        fn = problem.reference
    else:
        path = Path(solution)  # type: ignore[arg-type]
        m = SOLUTION_RE.match(path.name)
        assert m is not None
        row.update(plan=m.group(2), dsl=m.group(3), file=path.name)
        fn = _load(path, f"solution_{number}_{m.group(2)}_{m.group(3)}").run
        # first call builds the kernel; not timed
        fn(*problem.make_inputs(problem.workload, seed=_seed(), device=DEVICE))
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        row["build_s"] = round(time.perf_counter() - t0, 2)
        worst = 0.0
        for d in range(draws):
            ok, detail, ratio = _check(problem, fn, _seed())
            worst = max(worst, ratio)
            if not ok:
                row.update(passed=False, detail=f"draw {d}: {detail}", err_ratio=ratio)
                return row
        row.update(passed=True, err_ratio=worst)
    times = _time(problem, fn, flush=False)
    flushed = _time(problem, fn, flush=True)
    row["ms"] = statistics.median(times)
    row["ms_flushed"] = statistics.median(flushed)
    if kind != "eager":
        ok, detail, _ = _check(problem, fn, _seed())
        if not ok:
            row.update(passed=False, detail=f"after timing: {detail}")
    cost = problem.cost()
    sol_s = max(cost.bytes / PEAKS["bytes"], sum(n / PEAKS[c] for c, n in cost.flops.items()))
    row["sol_ms"] = sol_s * 1e3
    row["bytes"] = cost.bytes
    return row


# ------------------------------------------------------------------------------------------------
# parent
# ------------------------------------------------------------------------------------------------


def environment() -> dict[str, str]:
    env: dict[str, str] = {"date": time.strftime("%Y-%m-%d")}
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        env["gpu"], env["driver"] = (s.strip() for s in smi.stdout.splitlines()[0].split(","))
    except Exception as exc:  # report, do not fail the run
        env["gpu"] = f"unknown ({exc})"
    code = (
        "import json, torch, tvm, cutlass; print(json.dumps({'torch': torch.__version__, "
        "'cuda': torch.version.cuda, 'tvm': tvm.__version__, 'cutlass_dsl': cutlass.__version__}))"
    )
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        env.update(json.loads(out.stdout.strip().splitlines()[-1]))
    except Exception as exc:
        env["versions"] = f"unknown ({exc})"
    env["python"] = sys.version.split()[0]
    return env


def run_child(args: list[str], timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"passed": False, "detail": f"timed out after {timeout:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-12:]
    return {"passed": False, "detail": f"child exited {proc.returncode}: " + " | ".join(tail)}


def table(rows: list[dict[str, Any]], eager: dict[str, dict[str, Any]], env: dict[str, str]) -> str:
    head = (
        "| problem | DSL | plan | passed | runtime ms | flushed ms | eager ms | speedup | SOL ms | SOL fraction "
        "| SOL fraction (flushed) | err/allowance |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in rows:
        e = eager.get(r["problem"], {})
        ms, ems, sol = r.get("ms"), e.get("ms"), r.get("sol_ms") or e.get("sol_ms")
        fl = r.get("ms_flushed")

        def f(x: float | None, fmt: str = "{:.4f}") -> str:
            return fmt.format(x) if isinstance(x, (int, float)) else "—"

        speed = min(ems / ms, 100.0) if ms and ems else None
        detail = " ".join(str(r.get("detail", "")).split()).replace("|", "/")[:160]
        passed = "yes" if r.get("passed") else f"NO ({detail})"
        lines.append(
            f"| {r['problem']} | {r.get('dsl', '?')} | {r.get('plan', '?')} | {passed} | {f(ms)} | {f(fl)} "
            f"| {f(ems)} | {f(speed, '{:.2f}')} | {f(sol)} | {f(sol / ms if sol and ms else None, '{:.2f}')} "
            f"| {f(sol / fl if sol and fl else None, '{:.2f}')} | {f(r.get('err_ratio'), '{:.3f}')} |"
        )
    foot = (
        f"\n{env.get('date')} · {env.get('gpu')} · driver {env.get('driver')} · CUDA {env.get('cuda')} · "
        f"torch {env.get('torch')} · Python {env.get('python')} · apache-tvm {env.get('tvm')} · "
        f"nvidia-cutlass-dsl {env.get('cutlass_dsl')} · paper protocol (10 warm-up + 50 timed calls on fresh "
        "inputs, median); flushed = same with a 256 MiB L2 flush before each timed call\n"
    )
    return head + "\n".join(lines) + "\n" + foot


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for the logs (default $OUT)")
    ap.add_argument("--only", default=None, help="comma-separated problem ids, e.g. p36,p28")
    ap.add_argument("--plans", default=None, help="comma-separated plan names, e.g. wgmma,wgmmapipe")
    ap.add_argument("--draws", type=int, default=5, help="correctness draws per solution")
    ap.add_argument("--budget", type=float, default=480.0, help="wall-clock seconds for the whole run")
    ap.add_argument("--timeout", type=float, default=150.0, help="seconds per child")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        kind, number = args.child[0], int(args.child[1])
        sol = args.child[2] if len(args.child) > 2 else None
        try:
            row = child(kind, number, sol, args.draws)
        except Exception as exc:  # the parent records the failure
            import traceback

            traceback.print_exc()
            row = {"passed": False, "detail": f"{type(exc).__name__}: {exc}"[:400]}
        print("RESULT " + json.dumps(row), flush=True)
        return

    t_start = time.perf_counter()
    only = {int(t.strip().lstrip("p")) for t in args.only.split(",")} if args.only else None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = environment()
    print("environment:", json.dumps(env), flush=True)
    sols = solutions(only, set(args.plans.split(",")) if args.plans else None)
    numbers = sorted({s[0] for s in sols})
    rows: list[dict[str, Any]] = []
    eager: dict[str, dict[str, Any]] = {}
    log = (out / "gpu_kernels.jsonl").open("w")
    jobs: list[tuple[str, int, Path | None]] = [("eager", n, None) for n in numbers]
    jobs += [("solution", n, p) for n, _, _, p in sols]
    for kind, n, path in jobs:
        left = args.budget - (time.perf_counter() - t_start)
        label = f"p{n:02d} {kind}" + (f" {path.name}" if path else "")
        if left < 20:
            print(f"SKIP {label}: budget spent", flush=True)
            row = {"problem": f"p{n:02d}", "passed": False, "detail": "skipped: budget spent"}
        else:
            t0 = time.perf_counter()
            row = run_child([kind, str(n), *([str(path)] if path else [])], min(args.timeout, left))
            row.setdefault("problem", f"p{n:02d}")
            print(f"{label}: {time.perf_counter() - t0:.1f} s {json.dumps(row)}", flush=True)
        if path:
            m = SOLUTION_RE.match(path.name)
            assert m is not None
            row.setdefault("plan", m.group(2))
            row.setdefault("dsl", m.group(3))
            rows.append(row)
        else:
            eager[row["problem"]] = row
        log.write(json.dumps({**row, "kind": kind}) + "\n")
        log.flush()
    md = table(rows, eager, env)
    (out / "gpu_kernels.md").write_text(md)
    print(md, flush=True)
    print(f"total {time.perf_counter() - t_start:.1f} s", flush=True)


if __name__ == "__main__":
    main()
