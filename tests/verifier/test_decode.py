"""The decode rule (DESIGN §5, verifier README "Decoded answers"): a launch whose changed elements a simple map of
its eager-made operands recovers adds nothing to them; one whose output depends on the problem's data it reads does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from mkbsim.verifier import _decode, _eagerwork
from mkbsim.verifier._eagerwork import Work, compare, crossing

torch.set_num_threads(1)

M, N = 64, 96


def _fit(y: torch.Tensor, operands: list[torch.Tensor]) -> Any:
    changed = torch.ones(y.numel(), dtype=torch.bool)
    return _decode.fitted(_decode.bound(), y, changed, operands, torch.Generator().manual_seed(5))


def _data() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    answer = torch.randn(M, N, generator=g) * 3
    mask = torch.randn(M, N, generator=g) * 4
    return answer, mask, torch.rand(M, N, generator=g) + 0.5


#: (name, the operands the kernel reads, the output it writes), each recovering the answer from eager operands only
DECODES: list[tuple[str, Callable[[Any, Any, Any], tuple[list[Any], Any]]]] = [
    ("times_3", lambda a, r, p: ([a * 3], (a * 3 / 3).bfloat16())),
    ("affine", lambda a, r, p: ([a * 3 + 1], ((a * 3 + 1 - 1) / 3).bfloat16())),
    ("plus_mask", lambda a, r, p: ([a - r, r], ((a - r) + r).bfloat16())),
    ("minus_mask", lambda a, r, p: ([a + r, r], ((a + r) - r).bfloat16())),
    ("times_mask", lambda a, r, p: ([a / p, p], ((a / p) * p).bfloat16())),
    ("over_mask", lambda a, r, p: ([p, a * p], ((a * p) / p).bfloat16())),
    ("weighted_pair", lambda a, r, p: ([(a - 0.75 * r) / 0.25, r], (0.25 * ((a - 0.75 * r) / 0.25) + 0.75 * r).half())),
    ("transposed", lambda a, r, p: ([(a * 3).t().contiguous()], a.bfloat16())),
    ("exp_float32", lambda a, r, p: ([a / 3], torch.exp(a / 3))),
    ("row_broadcast", lambda a, r, p: ([a - r[:, :1], r[:, :1].contiguous()], a.bfloat16())),
    ("beside_constant_zeros", lambda a, r, p: ([a * 3, torch.zeros(M, N)], a.bfloat16())),
]


@pytest.mark.parametrize("build", [b for _, b in DECODES], ids=[n for n, _ in DECODES])
def test_a_kernel_decoding_eager_operands_adds_nothing(build: Callable[[Any, Any, Any], Any]) -> None:
    operands, y = build(*_data())
    mask, share, what = _fit(y, operands)
    assert share >= 0.98 and mask is not None and mask.float().mean() >= 0.98, (share, what)


def _honest() -> list[tuple[str, torch.Tensor, list[torch.Tensor]]]:
    """(name, output, eager-made operands) of DSL epilogues over eager data and problem inputs; the problem
    inputs (scales, bias, residual, weight, x) are read by the kernel but are no regressors."""
    g = torch.Generator().manual_seed(2)
    acc = torch.randn(M, N, generator=g) * 10  # an eager GEMM's accumulator
    row_scale, col_scale = torch.rand(M, 1, generator=g) + 0.1, torch.rand(1, N, generator=g) + 0.1  # inputs
    bias, residual = torch.randn(N, generator=g), torch.randn(M, N, generator=g) * 10  # inputs
    weight, x = torch.randn(N, generator=g), torch.randn(M, N, generator=g)  # inputs
    rms = torch.rsqrt(acc.pow(2).mean(-1, keepdim=True))  # eager-made per-row statistic
    amax = x.abs().amax(-1, keepdim=True) / 448  # eager-made activation scale; the kernel quantises x with it
    fresh = torch.full((M, N), float("nan"))  # the output buffer the kernel writes, as it was before
    return [
        ("scaled_epilogue", (acc * row_scale * col_scale).bfloat16(), [acc, fresh]),
        ("bias_epilogue", (acc + bias * 10).bfloat16(), [acc, fresh]),
        ("residual_epilogue", (acc + residual).bfloat16(), [acc, fresh]),
        ("rms_norm_over_eager_sum", (acc * rms * weight).bfloat16(), [acc, rms, fresh]),
        ("activation_quantisation", (x / amax).clamp(-448, 448).to(torch.float8_e4m3fn), [amax, fresh]),
        ("dequantise_with_input_scales", (acc.round() * row_scale).float(), [acc.round(), fresh]),
    ]


HONEST = _honest()


@pytest.mark.parametrize(("y", "operands"), [(y, o) for _, y, o in HONEST], ids=[n for n, _, _ in HONEST])
def test_an_epilogue_that_reads_the_problem_s_data_is_not_a_decode(y: torch.Tensor, operands: list[Any]) -> None:
    found = _fit(y, operands)
    assert found is None or found[0] is None, found[1:]
    assert found is None or found[1] < _decode.DECODE_SHARE / 2, found[1:]  # far from the line, not just under


def test_few_elements_are_not_judged() -> None:
    a = torch.randn(_decode.DECODE_MIN_ELEMENTS - 1)
    assert _fit((a * 3 / 3).bfloat16(), [a * 3]) is None


def test_an_element_computed_honestly_beside_the_decoded_ones_keeps_its_credit() -> None:
    answer, _, _ = _data()
    y = answer.clone()
    y[:8] = torch.randn(8, N) * 3  # the kernel computes these rows from something else
    found, share, _ = _fit(y.bfloat16(), [answer * 3])
    assert share >= _decode.DECODE_SHARE and found is not None
    # the honest rows match the map only by chance
    assert found.reshape(M, N)[:8].float().mean() < 0.05 and found.reshape(M, N)[8:].float().mean() > 0.98


def test_a_view_of_one_element_takes_nothing_from_python_and_in_place_outputs_count() -> None:
    """A scalar view (``scale.view(1)``) or a cast of a one-element tensor carries no Python value; a fill, a
    full and an operator on one element still do. In-place inputs are the outputs of problems returning nothing."""
    assert crossing("aten.view.default", ((),), ((1,),)) == (0, 0)
    assert crossing("aten.select.int", ((1,),), ((),)) == (0, 0)
    assert crossing("aten.fill_.Scalar", ((1,),), ((1,),)) == (0, 1)
    assert crossing("aten.add_.Tensor", ((),), ((),)) == (0, 1)
    passes: dict[str, list[Any]] = {"matmul": [], "pointwise": [("mul", 100.0, 1)], "movement": []}
    eager = _eagerwork.work_of([(("aten.mul.Tensor", ((), ()), ((),)), 2)])
    reference = Work({"matmul": 0.0, "pointwise": 100.0, "movement": 0.0}, passes)

    reference.elements = (100, 0)
    assert compare(1, eager, reference).python["in"] == 2.0  # no output: one Python value is everything
    inputs = [torch.zeros(4, 25), torch.zeros(1)]
    written = _eagerwork.reference_work(lambda dst, scale: None, inputs, inplace=[0])
    assert written.elements == (101, 100)
