"""Helpers for the CPU emulations of the DSL solutions: problems, inputs, butterflies, the verifier's allowance.

An emulation replays a kernel's plan in torch (its grid, per-thread index maps, tiling, masking and
reduction order) so a kernel written without a GPU is checked here against the problem's reference,
under the same rule the verifier applies (DESIGN §5: float64 anchor, 3 · max(ref_error, eps · max|anchor|)).
"""

from __future__ import annotations

import ast
import contextlib
import math
from pathlib import Path
from typing import Any

import torch

from mkbsim.catalog import Problem, anchor_inputs, load_problem, outputs_of, problems_root


def problem(number: int) -> Problem:
    (path,) = sorted(problems_root().glob(f"*/{number:02d}_*.py"))
    return load_problem(path)


def inputs(prob: Problem, workload: dict[str, int], seed: int = 0) -> tuple[Any, ...]:
    return prob.make_inputs(workload, seed=seed)


def butterfly(x: torch.Tensor, width: int) -> torch.Tensor:
    """A width-`width` xor butterfly sum over the last dim (lanes), as the kernels' shuffles add:
    offsets width/2 .. 1, every lane ending with the group's sum."""
    lanes = torch.arange(x.shape[-1])
    off = width // 2
    while off:
        x = x + x[..., lanes ^ off]
        off //= 2
    return x


def assert_bijection(*index: torch.Tensor, shape: tuple[int, ...]) -> None:
    """The flattened multi-index (one tensor per dim) visits every element of `shape` exactly once."""
    flat = torch.zeros((), dtype=torch.int64)
    for idx, n in zip(index, shape, strict=True):
        assert int(idx.min()) >= 0 and int(idx.max()) < n, "index out of bounds"
        flat = flat * n + idx.to(torch.int64)
    counts = torch.bincount(flat.reshape(-1), minlength=int(torch.tensor(shape).prod()))
    assert int(counts.min()) == 1 and int(counts.max()) == 1, "elements missed or visited twice"


def worst_error(prob: Problem, args: tuple[Any, ...], candidate: Any) -> float:
    """max over outputs of max|candidate - anchor| / allowance (the verifier passes below 1)."""
    cand = list(candidate) if isinstance(candidate, tuple) else [candidate]
    anchor = outputs_of(prob, anchor_inputs(_clone(args)))
    ref = outputs_of(prob, _clone(args))
    assert len(cand) == len(ref)
    worst = 0.0
    for c, r, a in zip(cand, ref, anchor, strict=True):
        assert (c.shape, c.dtype) == (r.shape, r.dtype)
        if not r.dtype.is_floating_point:
            assert torch.equal(c, r)
            continue
        c64, r64, a64 = c.double(), r.double(), a.double()
        assert not torch.isnan(c64).any()
        allowance = 3 * max((r64 - a64).abs().max().item(), torch.finfo(c.dtype).eps * a64.abs().max().item())
        worst = max(worst, (c64 - a64).abs().max().item() / allowance)
    return worst


def _clone(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in args)


def constants(path: Path) -> dict[str, Any]:
    """The module-level constants of a solution file (`NAME = expression` over earlier constants), read
    without importing it (its DSL may be absent), so the emulation follows the file's tiling."""
    found: dict[str, Any] = {}
    for node in ast.parse(path.read_text()).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        names = [target] if isinstance(target, ast.Name) else getattr(target, "elts", [])
        if not names or not all(isinstance(n, ast.Name) for n in names):
            continue
        with contextlib.suppress(Exception):  # a non-constant: a DSL call, a dict of kernels
            value = eval(compile(ast.Expression(node.value), str(path), "eval"), {"math": math}, found)
            values = [value] if isinstance(target, ast.Name) else list(value)
            found.update(zip((n.id for n in names), values, strict=True))
    return found


def solution(family: str, name: str) -> Path:
    return problems_root() / family / "solutions" / name
