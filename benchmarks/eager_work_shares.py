"""The eager-work shares (verifier README, "Eager work"; ``mkbsim/verifier/_eagerwork.py``) of the study's
solutions under problems/*/solutions, without a GPU.

Each solution's DSL compile (``tvm.compile``, ``cute.compile``) is replaced by a stub whose launches do
nothing, and ``run()`` is called under the same operator recorder the verifier applies to the reference:
what is measured is the eager PyTorch around the kernels, which is all the rule prices. Shapes decide the
price, not values, except where the eager code follows a kernel's result (a count an MoE pipeline reads back):
there the stubbed kernel's empty output changes the path, so those rows are estimates (``data-dependent``).
At SMOKE the inputs are real CPU tensors; at the production workload they are fake tensors (no memory, no
compute), which data-dependent eager code cannot run on (``-``), unless ``--real`` asks for real ones; problems with
in-place inputs always get real ones there (what the reference changes in them is the answer the plain-Python rule's
shares are taken of: ``_eagerwork.answer_bytes``).

    python benchmarks/eager_work_shares.py [--workload smoke|workload|both] [--match PATTERN] [--real] [--plans]

``--plans`` prints each solution's plan kind instead (``mkbsim/verifier/_plankind.py``): the share of the
problem's products (else element work, else movement) its eager code made, and the kind that share gives.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from mkbsim.catalog import load_problem, problems_root
from mkbsim.verifier import _eagerwork, _provenance
from mkbsim.verifier._plankind import PlanKind, plan_kind

SOLUTION = re.compile(r"^(\d\d)_\w+_(tirx|cutedsl)\.py$")


#: The problem sizes of the run in progress (``_provenance.problem_sizes``) and the values its launches took from
#: Python: their arguments given by value and the integers their tensor arguments' layouts carry beyond those sizes
#: (``_provenance.layout_values``), as the verifier's vault counts them on a correctness draw.
_LAUNCHES: dict[str, Any] = {"lib": None, "known": {}, "rank": 0, "by_value": 0, "layout": 0}


class _Stub:
    """A compiled DSL program whose launches do nothing but count what they take from Python."""

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        lib = _LAUNCHES["lib"]
        for arg in (*args, *kwargs.values()):
            if isinstance(arg, torch.Tensor):
                if lib is not None:
                    _LAUNCHES["layout"] += _provenance.layout_values(lib, arg, _LAUNCHES["known"], _LAUNCHES["rank"])
            else:
                _LAUNCHES["by_value"] += 1
        return None

    def __getitem__(self, name: Any) -> _Stub:
        return self

    def __getattr__(self, name: str) -> _Stub:
        return self


@contextlib.contextmanager
def _stubbed_dsls() -> Iterator[None]:
    patched: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, value: Any) -> None:
        patched.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    import tvm

    patch(tvm, "compile", lambda *a, **k: _Stub())
    try:
        import cutlass.cute as cute
        import cutlass.cute.runtime as cute_runtime

        patch(cute, "compile", lambda *a, **k: _Stub())
        patch(cute_runtime, "from_dlpack", lambda t, *a, **k: t)
    except ImportError:
        pass
    try:
        yield
    finally:
        for owner, name, value in reversed(patched):
            setattr(owner, name, value)


def _load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"solution_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _work(fn: Any, inputs: list[Any]) -> _eagerwork.Work:
    return _eagerwork.work_of(_eagerwork.reference_ops(fn, inputs))


def priced(path: Path, workload: str, real: bool = False) -> tuple[_eagerwork.EagerWork, PlanKind, float]:
    """The solution's eager work against the reference's, its plan kind, and one launch value's share of the
    outputs, on one draw (seed 0)."""
    number = int(SOLUTION.match(path.name).group(1))  # type: ignore[union-attr]
    (problem_path,) = sorted(problems_root().glob(f"*/{number:02d}_*.py"))
    problem = load_problem(problem_path)
    axes = problem.smoke if workload == "smoke" else problem.workload
    mod = _load(path)
    if _LAUNCHES["lib"] is None:  # bound once, as a worker binds its vault's (on real tensors: before any fake mode)
        _LAUNCHES["lib"] = _provenance.provenance_lib(torch.device("cpu"))
    real_inputs = workload == "smoke" or real or bool(problem.inplace)
    with contextlib.ExitStack() as stack:
        if real_inputs:
            inputs = list(problem.make_inputs(axes, seed=0))
        else:
            from torch._subclasses.fake_tensor import FakeTensorMode

            fake = FakeTensorMode(allow_non_fake_inputs=True)
            with fake:
                inputs = list(problem.make_inputs(axes, seed=0))
            stack.enter_context(fake)
        inplace = [list(problem.inputs).index(name) for name in problem.inplace]
        _LAUNCHES.update(by_value=0, layout=0)
        numels = [*_numels(problem.reference, inputs), *(inputs[i].numel() for i in inplace)]
        tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
        _LAUNCHES["known"], _LAUNCHES["rank"] = _provenance.problem_sizes(_LAUNCHES["lib"], inputs, tensors, numels)
        eager = _work(mod.run, inputs)
        # the draw's own useful work, as the verifier prices it (fake tensors hold no lengths: the nominal one)
        cost = problem.input_cost(axes, inputs) if real_inputs else problem.cost(axes)
        reference = _eagerwork.reference_work(problem.reference, inputs, cost.total_flops, inplace, cost.floor_flops)
    # the launches' values as the vault counts them (``_eagerwork.LAUNCH_SCALARS``: 64 bits each), per byte of the
    # answer (``_eagerwork.answer_bytes``): by value, and in the tensor arguments' layouts
    per_output = _eagerwork.SCALAR_BYTES / max(reference.informative[1], 1)
    return _eagerwork.compare(1, eager, reference), plan_kind(eager, reference), per_output


def shares(path: Path, workload: str, real: bool = False) -> dict[str, float]:
    found, _, per_output = priced(path, workload, real)
    return {**found.shares, "passes": found.passes, "useful": found.useful, "py_out": found.python["out"],
            "py_in": found.python["in"], "py_byval": _LAUNCHES["by_value"] * per_output,
            "py_layout": _LAUNCHES["layout"] * per_output}  # fmt: skip


def _numels(reference: Any, inputs: list[Any]) -> list[int]:
    """The element counts of the reference's outputs on copies of ``inputs``."""
    copies = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    outputs = reference(*copies)
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    return [t.numel() for t in outputs if isinstance(t, torch.Tensor)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("smoke", "workload", "both"), default="both")
    parser.add_argument("--match", default="", help="only solution files whose name contains this")
    parser.add_argument("--real", action="store_true", help="real tensors at the production workload (memory!)")
    parser.add_argument("--plans", action="store_true", help="each solution's plan kind, not its eager-work shares")
    args = parser.parse_args()
    torch.set_num_threads(1)
    workloads = ("smoke", "workload") if args.workload == "both" else (args.workload,)
    paths = sorted(p for p in problems_root().glob("*/solutions/*.py") if SOLUTION.match(p.name))
    print(f"{'solution':48s} " + " ".join(f"{w:>28s}" for w in workloads))
    with _stubbed_dsls():
        for path in paths:
            if args.match not in path.name:
                continue
            cells = []
            for workload in workloads:
                try:
                    if args.plans:
                        plan = priced(path, workload, args.real)[1]
                        cell = f"{plan.kind} {plan.eager_share:.3g} of {plan.basis}"
                    else:
                        found = shares(path, workload, args.real)
                        cell = " ".join(f"{k if k.startswith('py_') else k[:2]}={v:.3f}" for k, v in found.items())
                except Exception as exc:  # a row per solution, whatever breaks
                    print(f"  {path.name} {workload}: {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr)
                    cell = "-"
                cells.append(f"{cell:>28s}")
            print(f"{path.name:48s} " + " ".join(cells), flush=True)


if __name__ == "__main__":
    main()
