"""On the GPU machine: the device's ceilings, and where p58's verifier-vs-do_bench gap comes from.

    export PYTHONPATH=$PWD:/opt/dsl:/opt/dsl/nvidia_cutlass_dsl/dsl_packages CUDA_PATH=/usr/local/cuda
    python3 benchmarks/gpu_dispatch_gap.py --out $OUT

1. Ceilings: a 4 GiB fp32 device copy (bytes read + written), an 8192^3 bf16 matmul and the same in fp8 e4m3
   (`torch._scaled_mm`), CUDA-event medians.
2. Each named solution (default: p58's two, two launches per call) timed on one production draw: do_bench;
   the paper protocol's shape (synchronize, record, call, record, synchronize); the same after a 256 MB L2
   flush; 50 calls enqueued back to back (the host runs ahead of the GPU); the host's own cost per call
   (not waiting for the GPU); and the kernels' device time from the profiler. Results: OUT/dispatch_gap.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

DEFAULT = ["problems/quantization/solutions/58_fused_cutedsl.py", "problems/quantization/solutions/58_fused_tirx.py"]


def event_ms(fn: Callable[[], object], reps: int = 20, warmup: int = 3, before: Callable[[], object] | None = None,
             ) -> float:  # fmt: skip
    """Median of ``reps`` calls, each: (before), synchronize, record, call, record, synchronize."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        if before is not None:
            before()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def ceilings() -> dict[str, Any]:
    n, m = 1 << 30, 8192
    out: dict[str, Any] = {"gpu": torch.cuda.get_device_name(0)}
    src = torch.empty(n, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    out["copy_TBps"] = 2 * 4 * n / (event_ms(lambda: dst.copy_(src)) * 1e-3) / 1e12
    src = dst = torch.empty(0, device="cuda")  # free both before the matmuls
    a = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    out["bf16_TFLOPs"] = 2 * m**3 / (event_ms(lambda: a @ b, reps=10) * 1e-3) / 1e12
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t().contiguous().t()
    one = torch.ones((), device="cuda")
    fp8 = event_ms(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), reps=10)
    out["fp8_TFLOPs"] = 2 * m**3 / (fp8 * 1e-3) / 1e12
    torch.cuda.empty_cache()
    return out


def breakdown(path: Path) -> dict[str, Any]:
    import triton.testing
    from torch.profiler import ProfilerActivity, profile

    from mkbsim.catalog import load_catalog

    problem = load_catalog().get(f"p{path.stem.split('_')[0]}")
    spec = importlib.util.spec_from_file_location(f"solution_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    solution = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(solution)
    inputs = problem.module.make_inputs(problem.workload, seed=1, device="cuda")

    def call() -> object:
        return solution.run(*inputs)

    call()
    flush = torch.empty(64 << 20, dtype=torch.int32, device="cuda")
    r: dict[str, Any] = {
        "do_bench_median": triton.testing.do_bench(call, warmup=25, rep=200, return_mode="median"),
        "paper_same_inputs": event_ms(call, reps=50, warmup=10),
        "paper_after_l2_flush": event_ms(call, reps=50, before=flush.zero_),
    }
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(50):
        call()
    end.record()
    torch.cuda.synchronize()
    r["back_to_back_mean"] = start.elapsed_time(end) / 50
    began = time.perf_counter()
    for _ in range(50):
        call()
    r["host_dispatch_ms_per_call"] = (time.perf_counter() - began) / 50 * 1e3
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for _ in range(10):
            torch.cuda.synchronize()
            call()
            torch.cuda.synchronize()
    kernels = [(e.key, e.device_time_total / 10 / 1e3) for e in prof.key_averages() if e.device_time_total > 0]
    r["kernels_ms_per_call"] = sorted(kernels, key=lambda k: -k[1])[:8]
    return r


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, default=[Path(f) for f in DEFAULT])
    parser.add_argument("--out", type=Path, default=Path("/tmp/mkbsim-gpu"))
    args = parser.parse_args()
    result: dict[str, Any] = {"ceilings": ceilings()}
    print(json.dumps(result["ceilings"]), flush=True)
    for path in args.files:
        result[path.name] = breakdown(path)
        print(path.name, json.dumps(result[path.name]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "dispatch_gap.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
