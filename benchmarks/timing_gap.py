"""On the GPU machine: why fast calls time lower through the verifier than in the kernel harness.

    python3 benchmarks/timing_gap.py FILE PROBLEM_ID [FILE PROBLEM_ID ...]

For each solution, 10 warm-up + 50 timed calls, each timed the same way (synchronise, record, call, record,
synchronise), with the inputs given three ways: fresh tensors drawn for every call (the harness), one set
of tensors refilled in place before every call (what the verifier's paper protocol hands `run`), and one
set reused untouched. Medians in µs; prints a markdown table.
"""

from __future__ import annotations

import importlib.util
import random
import statistics
import sys
from pathlib import Path
from typing import Any

import torch

from mkbsim.catalog import load_catalog

WARMUP, TIMED = 10, 50


def _load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"gap_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _timed(fn: Any, args: tuple[Any, ...]) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    fn(*args)
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) * 1e3


def medians(path: Path, problem_id: str) -> dict[str, float]:
    problem = load_catalog().get(problem_id)
    run = _load(path).run

    def draw() -> tuple[Any, ...]:
        return tuple(problem.make_inputs(problem.workload, seed=random.getrandbits(63), device="cuda"))

    fixed = draw()
    out: dict[str, list[float]] = {"fresh": [], "refilled": [], "reused": []}
    for i in range(WARMUP + TIMED):
        fresh = draw()
        t_fresh = _timed(run, fresh)
        for dst, src in zip(fixed, draw(), strict=True):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        t_refilled = _timed(run, fixed)
        t_reused = _timed(run, fixed)
        if i >= WARMUP:
            out["fresh"].append(t_fresh)
            out["refilled"].append(t_refilled)
            out["reused"].append(t_reused)
    return {k: statistics.median(v) for k, v in out.items()}


def main() -> None:
    args = sys.argv[1:]
    print("| solution | fresh tensors µs | same tensors, refilled µs | same tensors, untouched µs |")
    print("|---|---|---|---|")
    for file, pid in zip(args[::2], args[1::2], strict=True):
        m = medians(Path(file), pid)
        print(f"| {Path(file).stem} | {m['fresh']:.1f} | {m['refilled']:.1f} | {m['reused']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
