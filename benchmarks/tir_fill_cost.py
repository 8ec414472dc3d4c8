"""Per-call cost of a step of the CPU TIRx memory check: each submission's ``run`` timed with its kernels built
without the step and as the gate builds them now, side by side in one process, the two alternating round by round.
The steps: ``fill``, a kernel's allocations filled with the erase sentinel (``_tir_memory.filled``, red team rt18
F4); ``span``, the buffers' sizes checked (``_tir_memory.sized``) and a clamped access of a buffer that may be
empty guarded by its having elements (``_tir_memory.clamped``, red team rt19 F1, F3).

    OMP_NUM_THREADS=1 python benchmarks/tir_fill_cost.py [--step fill|span] [--workload smoke|production]
        [--rounds 15] [--only p28]

Prints, per case, the allocations in its built TIR and the median and least ms per call of each build (the least
is the steadier figure on a loaded machine).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
import tvm
import tvm_ffi

from mkbsim.catalog import load_catalog
from mkbsim.verifier import _dsl, _tir_memory
from mkbsim.verifier._vault import Registry

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "submissions"
HONEST = ROOT / "tests" / "verifier" / "honest"
CASES = [
    (EXAMPLES / "p36_rmsnorm_tirx.py", "p36"),  # no allocation: the control
    (EXAMPLES / "p28_fused_add_rmsnorm_tirx.py", "p28"),
    (EXAMPLES / "p25_kv_block_copy_tirx.py", "p25"),
    (HONEST / "inference_mode_scratch_between_kernels.py", "p28"),
    (HONEST / "moe_per_expert_dsl_combine_p51.py", "p51"),
    (HONEST / "fp8_cache_append_in_place.py", "p21"),
    (HONEST / "staging_copy_p36.py", "p36"),
]


def _checker(step: str, now: bool) -> Any:
    """``_tir_memory.checked`` as the gate makes it (``now``), or without ``step``."""
    if now:
        return _dsl.tir_memory_check(Registry().protect)
    # the parts the gate's check is made of are read when it is made: these stand in for them meanwhile
    if step == "fill":
        without = [(_tir_memory, "filled", lambda func, **_: func)]
    else:
        without = [
            (_tir_memory, "sized", lambda func, **_: (func, [])),
            (tvm.tirx, "if_then_else", lambda condition, load, otherwise: load),
            (tvm.tirx, "IfThenElse", lambda condition, store, otherwise: store),
        ]
    kept = [(owner, name, getattr(owner, name)) for owner, name, _ in without]
    for owner, name, value in without:
        setattr(owner, name, value)
    try:
        return _dsl.tir_memory_check(Registry().protect)
    finally:
        for owner, name, value in kept:
            setattr(owner, name, value)


def _allocations(mod: Any) -> int:
    found = [0]

    def visit(node: Any) -> None:
        if isinstance(node, tvm.tirx.AllocBuffer):
            found[0] += 1
        elif isinstance(node, tvm.s_tir.SBlock):
            found[0] += len(node.alloc_buffers)

    tvm_ffi.structural_walk(mod, visit, order="pre")
    return found[0]


def _loaded(path: Path, step: str, now: bool, allocations: list[int]) -> Any:
    """The submission module, its TIRx builds checked as the gate's are (``now``) or without ``step``."""
    original, checker = tvm.tirx.build, _checker(step, now)

    def build(mod: Any, target: Any = None, pipeline: Any = "default") -> Any:
        mod, reasons = checker(mod, target)
        assert not reasons, reasons
        allocations.append(_allocations(mod))
        return original(mod, target, pipeline)

    tvm.tirx.build = build
    try:
        spec = importlib.util.spec_from_file_location(f"{path.stem}_{step}_{'now' if now else 'without'}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # TVMScript's parser finds the source through it
        spec.loader.exec_module(module)
        return module
    finally:
        tvm.tirx.build = original


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--step", choices=("fill", "span"), default="fill")
    parser.add_argument("--workload", choices=("smoke", "production"), default="production")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--only", default="", help="the cases whose file name contains this")
    args = parser.parse_args()
    catalog = load_catalog()
    print(f"{'case':40} {'problem':7} {'allocs':>6}  median ms: without  now      least: without  now")
    for path, problem_id in [case for case in CASES if args.only in case[0].name]:
        problem = catalog.get(problem_id)
        workload = problem.smoke if args.workload == "smoke" else problem.workload
        inputs = problem.make_inputs(dict(workload), seed=0)
        counted: list[int] = []
        runs = [_loaded(path, args.step, now, counted if now else []).run for now in (False, True)]
        times: list[list[float]] = [[], []]
        for r in range(args.rounds + 1):
            for k in (0, 1) if r % 2 else (1, 0):
                # in-place problems update their inputs
                fresh = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
                start = time.perf_counter()
                runs[k](*fresh)
                if r:  # the first round warms both up
                    times[k].append((time.perf_counter() - start) * 1e3)
        median, least = [statistics.median(t) for t in times], [min(t) for t in times]
        name = re.sub(r"\.py$", "", path.name)
        figures = f"{median[0]:19.3f} {median[1]:7.3f} {least[0]:16.3f} {least[1]:7.3f}"
        print(f"{name:40} {problem_id:7} {sum(counted):6} {figures}")


if __name__ == "__main__":
    main()
