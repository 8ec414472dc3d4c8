"""On the GPU machine: how a solution's paper-protocol time depends on what the host did between calls.

    export PYTHONPATH=$PWD:/opt/dsl:/opt/dsl/nvidia_cutlass_dsl/dsl_packages CUDA_PATH=/usr/local/cuda
    python3 benchmarks/gpu_cold_host.py examples/submissions/cuda/p36_rmsnorm_cutedsl.py \\
        problems/attention/solutions/02_splitkvprefetch_tirx.py --json $OUT/cold_host.json
    python3 benchmarks/gpu_cold_host.py FILE --pin 5            # the process held on one core
    python3 benchmarks/gpu_cold_host.py FILE --dma-latency 0   # deep C-states kept off (/dev/cpu_dma_latency, root)

In a plain process (no verifier): each file's run() on one production draw, timed as the paper protocol times a
call (synchronise, record, call, record, synchronise; CUDA events, and the host's clock around the call), 30
times after 8 warm-ups, with something done before every call: nothing, a sleep, a 135 MB copy to the GPU and
back through pageable or pinned host memory, a busy loop, what the verifier's worker does between two calls of a
block (its thread census through /proc, the outputs copied aside), a small device operation after a pause; and
`triton.testing.do_bench` for reference. ``--pin`` and ``--dma-latency`` ask whether the cost after a pause is the
thread moving between cores or the core's idle state (which empties its caches).
benchmarks/RESULTS.md "Cold host on the H200".
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STAGED_BYTES = 135_000_000  # p02's staged arena
WARMUPS, CALLS = 8, 30


def _busy(ms: float) -> None:
    until = time.perf_counter() + ms / 1e3
    while time.perf_counter() < until:
        pass


def paper_ms(fn: Callable[[], object], before: Callable[[], object] | None) -> tuple[float, float]:
    """Median (event ms, host ms) of paper-protocol calls of ``fn``, ``before`` run ahead of each."""
    import torch

    events, hosts = [], []
    for i in range(WARMUPS + CALLS):
        if before is not None:
            before()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        end.record()
        end.synchronize()
        if i >= WARMUPS:
            events.append(start.elapsed_time(end))
            hosts.append((t1 - t0) * 1e3)
    return round(statistics.median(events), 4), round(statistics.median(hosts), 4)


def _census() -> None:
    """The worker's per-call thread census: every thread's schedstat read through /proc."""
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            f.read()


def gaps() -> dict[str, Callable[[], object] | None]:
    import torch

    pageable = torch.empty(STAGED_BYTES, dtype=torch.uint8)
    pinned = torch.empty(STAGED_BYTES, dtype=torch.uint8, pin_memory=True)
    device = torch.empty(STAGED_BYTES, dtype=torch.uint8, device="cuda")

    def round_trip(host: torch.Tensor) -> None:
        device.copy_(host)
        host.copy_(device)
        torch.cuda.synchronize()

    scratch = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
    aside = torch.empty_like(scratch)

    def kick() -> None:
        scratch.add_(1)
        torch.cuda.synchronize()

    def between_calls() -> None:
        _census()
        aside.copy_(scratch)
        torch.cuda.synchronize()

    return {
        "nothing": None,
        "census and an output copied aside": between_calls,
        "busy 1 ms": lambda: _busy(1),
        "sleep 0.5 ms": lambda: time.sleep(0.0005),
        "sleep 5 ms": lambda: time.sleep(0.005),
        "sleep 5 ms, a device op": lambda: (time.sleep(0.005), kick()),
        "sleep 50 ms": lambda: time.sleep(0.05),
        "sleep 50 ms, busy 2 ms": lambda: (time.sleep(0.05), _busy(2)),
        "pageable 135 MB in and out": lambda: round_trip(pageable),
        "pinned 135 MB in and out": lambda: round_trip(pinned),
        "pinned 135 MB, busy 2 ms": lambda: (round_trip(pinned), _busy(2)),
    }


def measure(path: Path) -> dict[str, Any]:
    import torch
    import triton.testing

    from mkbsim.catalog import load_catalog

    problem = load_catalog().get("p" + path.stem.split("_")[0].removeprefix("p"))
    spec = importlib.util.spec_from_file_location(f"cold_host_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    inputs = problem.module.make_inputs(problem.workload, seed=7, device="cuda")
    fn = lambda: module.run(*inputs)  # noqa: E731
    fn()
    torch.cuda.synchronize()
    row: dict[str, Any] = {"do_bench_ms": float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))}
    for name, before in gaps().items():
        row[name] = paper_ms(fn, before)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--pin", type=int, help="hold the process on this core")
    parser.add_argument("--dma-latency", type=int, help="hold /dev/cpu_dma_latency at this many µs (root)")
    args = parser.parse_args()
    if args.pin is not None:
        os.sched_setaffinity(0, {args.pin})
    out: dict[str, Any] = {"pin": args.pin, "dma_latency": args.dma_latency}
    with contextlib.ExitStack() as held:
        if args.dma_latency is not None:  # the kernel keeps the request while the file is open
            latency = held.enter_context(open("/dev/cpu_dma_latency", "wb", buffering=0))
            latency.write(args.dma_latency.to_bytes(4, "little"))
        for path in args.files:
            out[path.name] = measure(path)
            print(path.name, json.dumps(out[path.name]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
