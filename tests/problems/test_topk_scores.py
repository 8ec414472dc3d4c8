"""Router scores with an unambiguous top-k (problems/_common.py `distinct_topk_scores`, DESIGN §5).

The verifier compares routing problems exactly only because their inputs have no near-tie at the
top-k boundary. At production shapes in bf16 most rows draw one (8 mantissa bits, 512 scores a row),
so the draw must repair rows instead of redrawing them: every problem that uses it gets scores at its
production shape for several seeds, the top-k values are the plain draw's, and the others only move down.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest
import torch

from mkbsim.catalog import problems_root
from problems._common import distinct_topk_scores, generator, randn

# (problem, its logits dtype); the shape and k come from the problem module
USERS = (("p45", torch.bfloat16), ("p48", torch.bfloat16), ("p51", torch.float32))


def _module(pid: str) -> ModuleType:
    path = next(problems_root().glob(f"moe/{pid[1:]}_*.py"))
    return importlib.import_module(f"problems.moe.{path.stem}")


def _shape(pid: str) -> tuple[int, int]:
    w = _module(pid).WORKLOAD
    return w["num_tokens"], w["num_experts"]


def _near_ties(x: torch.Tensor, k: int) -> int:
    """Rows whose k-th and (k+1)-th largest values are within 4 eps(dtype), relative (the draw's rule)."""
    top = torch.topk(x.float(), k + 1, dim=-1).values
    gap = 4 * torch.finfo(x.dtype).eps
    return int(((top[..., k - 1] - top[..., k]) <= gap * top[..., k - 1].abs().clamp_min(1.0)).sum())


@pytest.mark.parametrize(("pid", "dtype"), USERS)
def test_production_draws_have_no_near_ties(pid: str, dtype: torch.dtype) -> None:
    k = _module(pid).TOP_K
    plain = randn(_shape(pid), torch.float32, generator(0, "cpu"), "cpu").to(dtype)
    for seed in range(3):
        x = distinct_topk_scores(_shape(pid), k, dtype, generator(seed, "cpu"), "cpu")
        assert x.dtype == dtype and x.shape == _shape(pid)
        assert _near_ties(x, k) == 0
    if dtype == torch.bfloat16:  # the repair is needed: most plain bf16 rows have a near-tie
        assert _near_ties(plain, k) > plain.shape[0] // 4


def test_top_k_values_are_the_plain_draw_and_the_rest_only_move_down() -> None:
    shape, k = (512, 512), 10
    plain = randn(shape, torch.float32, generator(5, "cpu"), "cpu").to(torch.bfloat16)
    x = distinct_topk_scores(shape, k, torch.bfloat16, generator(5, "cpu"), "cpu")
    top = torch.topk(plain.float(), k, dim=-1).indices
    assert torch.equal(x.gather(-1, top), plain.gather(-1, top))
    assert bool((x <= plain).all())
    assert torch.equal(torch.topk(x.float(), k, dim=-1).indices.sort().values, top.sort().values)
    moved = (x != plain).any(dim=-1)
    assert 0 < int(moved.sum()) < shape[0]  # only the rows that had a near-tie


@pytest.mark.slow
def test_p48_make_inputs_at_production() -> None:
    problem = _module("p48")
    for seed in range(2):
        logits = problem.make_inputs(problem.WORKLOAD, seed=seed)[1]
        assert _near_ties(logits, problem.TOP_K) == 0
