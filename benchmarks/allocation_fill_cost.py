"""Per-call cost of torch's fill of fresh cpu allocations (``_allocator``: every worker call's ``torch.empty`` holds
``FILL_WORD`` until written, so that the twin draw holds its fresh memory as the evidence call did): each submission's
``run`` and the problem's eager ``reference`` timed with the fill off and on, side by side in one process, the two
alternating round by round (the speedup the verifier reports is their ratio, and both pay the fill).

    OMP_NUM_THREADS=1 python benchmarks/allocation_fill_cost.py [--workload smoke|production] [--rounds 15]
        [--only p36] [--malloc [--pairs 3]]

Prints, per case, the bytes it allocates per call and the median ms per call of ``run`` and of ``reference``, fill
off and on, and the change in the speedup (reference / run) the fill makes. ``--malloc``: the cost of glibc's fill
(``_allocator.MALLOC_TUNABLES``, set in a cpu worker's environment, and numpy's allocations through it), torch's fill
on throughout: glibc reads its tunables when a process starts, so the script runs itself as a child with and without
them, ``--pairs`` times each, alternating, and prints the medians of the children's medians.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from mkbsim.catalog import load_catalog
from mkbsim.verifier import _allocator

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "submissions"
HONEST = ROOT / "tests" / "verifier" / "honest"
CASES = [
    (EXAMPLES / "p36_rmsnorm_tirx.py", "p36"),
    (EXAMPLES / "p28_fused_add_rmsnorm_tirx.py", "p28"),
    (EXAMPLES / "p25_kv_block_copy_tirx.py", "p25"),
    (HONEST / "padded_rows_cast_eagerly_from_an_empty_buffer_p36.py", "p36"),
    (HONEST / "moe_per_expert_dsl_combine_p51.py", "p51"),
    (HONEST / "fp8_cache_append_in_place.py", "p21"),
    (HONEST / "numpy_empty_workspace_every_call_p36.py", "p36"),
    (HONEST / "tvm_runtime_empty_workspace_every_call_p36.py", "p36"),
]


def _loaded(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # TVMScript's parser finds the source through it
    spec.loader.exec_module(module)
    return module


def _allocated(fn: Any, inputs: list[Any]) -> int:
    """Bytes of new storage the call's eager operators return (each a fresh allocation the fill writes)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    given = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    total = [0]

    class Allocations(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            read = {a.untyped_storage().data_ptr() for a in torch.utils._pytree.tree_leaves((args, kwargs))
                    if isinstance(a, torch.Tensor)}  # fmt: skip
            for t in torch.utils._pytree.tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in read:
                    total[0] += t.untyped_storage().nbytes()
            return out

    with Allocations():
        fn(*given)
    return total[0]


def _times(fns: list[Any], inputs: list[Any], rounds: int, flag: Any) -> list[list[float]]:
    """Per (fn, fill off/on): ms per call, the order alternating round by round; the first round warms up."""
    times: list[list[float]] = [[] for _ in range(2 * len(fns))]
    for r in range(rounds + 1):
        for fill in (False, True) if r % 2 else (True, False):
            flag.value = fill
            for k, fn in enumerate(fns):
                given = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]  # (in-place problems)
                start = time.perf_counter()
                fn(*given)
                if r:
                    times[2 * k + fill].append((time.perf_counter() - start) * 1e3)
    flag.value = False
    return times


def _cases(only: str) -> list[tuple[Path, str]]:
    return [(path, problem_id) for path, problem_id in CASES
            if not only or only in path.name or only == problem_id]  # fmt: skip


def _children(args: argparse.Namespace) -> None:
    """``--malloc``: children alternately without and with glibc's fill; medians of their per-case medians."""
    base = [sys.executable, __file__, "--child", "--workload", args.workload, "--rounds", str(args.rounds)]
    if args.only:
        base += ["--only", args.only]
    found: dict[bool, dict[str, list[list[float]]]] = {False: {}, True: {}}
    for pair in range(args.pairs):
        for perturb in (False, True) if pair % 2 == 0 else (True, False):
            env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
            if perturb:
                env["GLIBC_TUNABLES"] = _allocator.MALLOC_TUNABLES
            out = subprocess.run(base, env=env, capture_output=True, text=True, check=True).stdout
            for name, times in json.loads(out.strip().splitlines()[-1]).items():
                found[perturb].setdefault(name, []).append(times)
    print(f"{'case':52} {'run ms: off':>11} {'on':>7} {'reference: off':>14} {'on':>7} {'speedup':>8}")
    for name in found[False]:
        run_off, ref_off = (statistics.median(t[k] for t in found[False][name]) for k in (0, 1))
        run_on, ref_on = (statistics.median(t[k] for t in found[True][name]) for k in (0, 1))
        change = (ref_on / run_on) / (ref_off / run_off) - 1
        print(f"{name[:52]:52} {run_off:11.3f} {run_on:7.3f} {ref_off:14.3f} {ref_on:7.3f} {change:+8.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=("smoke", "production"), default="smoke")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--only", default="", help="the cases whose problem or file name contains this")
    parser.add_argument("--malloc", action="store_true", help="glibc's fill off and on (torch's on)")
    parser.add_argument("--pairs", type=int, default=3, help="--malloc: children of each kind")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.malloc:
        _children(args)
        return
    torch.set_num_threads(1)
    flag = _allocator._flag()
    assert flag is not None, "this torch has no fill flag"
    if args.child and "GLIBC_TUNABLES" in os.environ:
        assert _allocator.fill_foreign_allocations(), "glibc's fill did not hold"
    catalog = load_catalog()
    measured: dict[str, list[float]] = {}
    if not args.child:
        print(f"{'case':52} {'MB/call':>8} {'run ms: off':>11} {'on':>7} {'reference: off':>14} {'on':>7} "
              f"{'speedup':>8}")  # fmt: skip
    for path, problem_id in _cases(args.only):
        problem = catalog.get(problem_id)
        workload = problem.smoke if args.workload == "smoke" else problem.workload
        inputs = list(problem.make_inputs(dict(workload), seed=0))
        fns = [_loaded(path).run, problem.reference]
        run_off, run_on, ref_off, ref_on = (statistics.median(t) for t in _times(fns, inputs, args.rounds, flag))
        if args.child:  # torch's fill on: what a worker runs with
            measured[path.stem] = [run_on, ref_on]
            continue
        allocated = _allocated(fns[0], inputs)
        change = (ref_on / run_on) / (ref_off / run_off) - 1
        print(f"{path.stem[:52]:52} {allocated / 1e6:8.2f} {run_off:11.3f} {run_on:7.3f} {ref_off:14.3f} "
              f"{ref_on:7.3f} {change:+8.1%}")
    if args.child:
        print(json.dumps(measured))


if __name__ == "__main__":
    main()
