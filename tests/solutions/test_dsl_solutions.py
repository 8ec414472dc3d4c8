"""The DSL solutions under problems/*/solutions/ (issue 11).

- On a GPU (``@pytest.mark.gpu``, run with MKBSIM_GPU_TESTS=1 on the H200 with the DSLs staged):
  every solution matches its problem's reference on fresh production-shape draws, under the
  verifier's allowance (DESIGN §5: float64 anchor, 3 · max(ref_error, eps(out dtype) · max|anchor|),
  INPLACE inputs compared after the call, integer outputs exact, no NaN).
- Anywhere the DSL is installed (slow): every solution's kernel compiles for sm_90a on the CPU
  (TIRx emits CUDA source; CuTe DSL lowers to PTX), so a broken kernel is caught without a GPU. An
  ordinary run builds one file of each family × plan × DSL; MKBSIM_ALL_SOLUTIONS=1 builds them all
  (`solution_sample`).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import random
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from solution_sample import ALL_SOLUTIONS, SOLUTION_RE, representatives, sampled
from test_single_file_solutions import ATTENTION_BUNDLED

from mkbsim.catalog import anchor_inputs, load_problem, problems_root

SOLUTIONS = sorted(p for p in problems_root().glob("*/solutions/*.py") if SOLUTION_RE.match(p.name))


def _problem_path(number: int) -> Path:
    (path,) = sorted(problems_root().glob(f"*/{number:02d}_*.py"))
    return path


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"solution_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@functools.cache
def tirx_smoke_build(path: Path) -> Any:
    """What a TIRx solution's `_build` returns at its problem's SMOKE shapes, built once per test process:
    the sm_90a compile check and the nvcc check of one file (one xdist group) share it."""
    number = int(SOLUTION_RE.match(path.name).group(1))  # type: ignore[union-attr]
    mod = _load(path)
    problem = load_problem(_problem_path(number))
    return mod._build(*mod._shape_key(*problem.make_inputs(problem.smoke, seed=0)))


def _clone(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)


def _outputs(problem: Any, fn: Any, inputs: tuple[Any, ...]) -> list[Any]:
    out = fn(*inputs)
    outs = list(out) if isinstance(out, tuple) else [out]
    names = list(problem.inputs)
    return outs + [inputs[names.index(n)] for n in problem.inplace]


def test_solution_files_are_named_by_plan_and_dsl() -> None:
    assert SOLUTIONS, "no solution files found"
    for path in SOLUTIONS:
        number = int(SOLUTION_RE.match(path.name).group(1))  # type: ignore[union-attr]
        assert _problem_path(number).parent == path.parent.parent, f"{path} is not beside its problem"
        assert path.read_text().lstrip().startswith('"""'), f"{path} needs a module docstring stating its plan"


@pytest.mark.gpu
@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_solution_matches_reference_on_cuda(path: Path) -> None:
    number = int(SOLUTION_RE.match(path.name).group(1))  # type: ignore[union-attr]
    problem = load_problem(_problem_path(number))
    run = _load(path).run
    for _ in range(2):
        inputs = problem.make_inputs(problem.workload, seed=random.SystemRandom().getrandbits(63), device="cuda")
        anchor = _outputs(problem, problem.reference, anchor_inputs(_clone(inputs)))
        ref = _outputs(problem, problem.reference, _clone(inputs))
        cand = _outputs(problem, run, _clone(inputs))
        assert len(cand) == len(anchor)
        for i, (c, r, a) in enumerate(zip(cand, ref, anchor, strict=True)):
            assert (c.shape, c.dtype, c.device) == (r.shape, r.dtype, r.device), f"output {i}"
            if not r.dtype.is_floating_point:
                assert torch.equal(c, r), f"output {i}: integer output differs"
                continue
            c64, r64, a64 = c.double(), r.double(), a.double()
            assert not torch.isnan(c64).any(), f"output {i}: NaN"
            err = (c64 - a64).abs().max().item()
            allowance = 3 * max((r64 - a64).abs().max().item(), torch.finfo(c.dtype).eps * a64.abs().max().item())
            assert err <= allowance, f"output {i}: max error {err:.3e} > allowance {allowance:.3e}"


def _built_under_the_guards(path: Path) -> list[pytest.MarkDecorator]:
    """A skip for a CuTe DSL file that `test_single_file_solutions` builds under the verifier's guards: the same
    `_compiled()` call with the guards on (a superset of this check; it needs TVM too, so only where TVM is)."""
    guarded = set(ATTENTION_BUNDLED if os.environ.get(ALL_SOLUTIONS) == "1" else representatives(ATTENTION_BUNDLED))
    if path in guarded and path.name.endswith("_cutedsl.py") and importlib.util.find_spec("tvm") is not None:
        return [pytest.mark.skip(reason="test_single_file_solutions builds it under the verifier's guards")]
    return []


@pytest.mark.slow
@pytest.mark.parametrize("path", sampled(SOLUTIONS, _built_under_the_guards))
def test_solution_kernel_compiles_for_sm90a(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = SOLUTION_RE.match(path.name)
    assert m is not None
    dsl = m.group(3)
    if dsl == "cutedsl":
        monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")  # no GPU to query here
    pytest.importorskip("cutlass" if dsl == "cutedsl" else "tvm")
    if dsl == "cutedsl":
        from cutlass.cutlass_dsl import CuTeDSL

        # the DSL reads CUTE_DSL_ARCH when it is first imported, which may have been before this test;
        # without it the arch defaults to sm_100a, where Hopper's WGMMA atoms refuse to build
        monkeypatch.setattr(CuTeDSL._get_dsl().envar, "arch", "sm_90a")
    if dsl == "cutedsl":
        assert _load(path)._compiled() is not None
    else:
        assert tirx_smoke_build(path) is not None
