"""Decodes keyed by the element's position (verifier README "Decoded answers", red team round 10's F1, F2, F4): the
residual of a launch's output against its eager operand, at the same positions, is the same on two correctness draws
for a key the kernel computes from the index, and varies with the data for an honest kernel; and an odd 64-bit factor
of the bit patterns is a bit map like XOR and plus."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from mkbsim.verifier import _decode, _keyed

torch.set_num_threads(1)

M, N = 64, 96
ODD = 0x5E3779B97F4A7C15  # an odd 64-bit key (below 2^63: an int64)
INDEX = torch.arange(M * N, dtype=torch.int64).reshape(M, N)
HASH = (INDEX * ODD) >> 3  # a hash of each element's index, as a kernel computes it (int64 products wrap)


def _unit(bits: torch.Tensor) -> torch.Tensor:
    """A hash's 24 high bits as a float in [0, 1)."""
    return ((bits >> 40) & 0xFFFFFF).double().div(1 << 24).float()


def _data(draw: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One correctness draw's answer (the eager code computed it) and the problem's x."""
    g = torch.Generator().manual_seed(100 + draw)
    return torch.randn(M, N, generator=g) * 3, torch.randn(M, N, generator=g)


WEIGHT = torch.linspace(0.5, 2.0, N)  # a problem input made the same on every draw (an RMSNorm weight)
TABLE = torch.randn(M, N, generator=torch.Generator().manual_seed(9))  # a table the submission made at import
BLOCK_SIZES = torch.tensor([16, 32]).repeat(N // 2)  # a problem input of two values, the same on every draw (p26)


Case = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]]


def _slots(a: torch.Tensor) -> torch.Tensor:
    return (a.abs() * 3000).long()  # ids of a cache's slots


#: (name, draw's data -> (the output, the eager-made operands the kernel reads, the problem inputs it reads)): each
#: kernel only undoes a key of the element's index
DECODES: list[tuple[str, Case]] = [
    ("int64_xor_index_hash", lambda a, x: (_slots(a), [_slots(a) ^ HASH], [])),
    ("uint8_codes_xor_index_hash", lambda a, x: (_slots(a).to(torch.uint8), [_slots(a).to(torch.uint8)
                                                 ^ (HASH & 255).to(torch.uint8)], [x])),
    ("float32_plus_index_key", lambda a, x: (a - _unit(HASH) * 8 + _unit(HASH) * 8, [a - _unit(HASH) * 8], [x])),
    ("float32_times_index_key", lambda a, x: ((a / (_unit(HASH) + 0.5)) * (_unit(HASH) + 0.5),
                                              [a / (_unit(HASH) + 0.5)], [])),
    ("bfloat16_minus_index_key", lambda a, x: (a.bfloat16(), [a + _unit(HASH)], [])),
    ("float32_bits_xor_index_hash", lambda a, x: (a, [a.view(torch.int32) ^ HASH.to(torch.int32)], [])),
    ("int64_times_odd_index_key", lambda a, x: (_slots(a), [_slots(a) * (HASH | 1)], [])),
    ("bool_xor_index_bit", lambda a, x: (a > 0, [(a > 0) ^ (HASH & 1).bool()], [])),
    # a problem input the same on every draw, read beside: no map of it explains the key
    ("float32_plus_index_key_beside_a_fixed_weight", lambda a, x: (a - _unit(HASH) * 8 + _unit(HASH) * 8,
                                                                   [a - _unit(HASH) * 8], [WEIGHT])),
    ("int64_xor_index_hash_beside_fixed_block_sizes", lambda a, x: (_slots(a), [_slots(a) ^ HASH], [BLOCK_SIZES])),
]  # fmt: skip


def _judged(case: Case, inputs: bool = True) -> Any:
    d = _keyed.bound(_decode.bound())
    draws = []
    for draw in (1, 2):
        y, operands, given = case(*_data(draw))
        changed = torch.ones(y.numel(), dtype=torch.bool)
        draws.append((y, changed, list(enumerate(operands)), [(len(operands) + k, g) for k, g in enumerate(given)]))
    (y, changed, operands, given) = draws[0]
    made = _keyed.kept(d, y, changed, operands, given if inputs else [], torch.Generator().manual_seed(5))
    assert made is not None
    y, changed, operands, given = draws[1]
    return _keyed.judged(d, y, changed, operands, given if inputs else [], made[0])[0]


@pytest.mark.parametrize("case", [c for _, c in DECODES], ids=[n for n, _ in DECODES])
def test_a_key_of_the_element_s_position_is_the_same_on_two_draws(case: Case) -> None:
    found = _judged(case)
    assert found is not None and found[0] >= 0.98, found


def test_the_decode_rule_s_maps_miss_a_position_key() -> None:
    """What this rule is for: no map of the operands holds a hash of the index."""
    a, _ = _data(1)
    y, operands, _ = DECODES[0][1](a, a)
    found = _decode.fitted(_decode.bound(), y, torch.ones(y.numel(), dtype=torch.bool), operands,
                           torch.Generator().manual_seed(5))  # fmt: skip
    assert found is None or found[1] < _decode.DECODE_SHARE, found


#: honest DSL stages over eager data, on two draws: their residual varies with the data, or says nothing
HONEST: list[tuple[str, Case]] = [
    ("residual_epilogue", lambda a, x: ((a + x).bfloat16(), [a], [x])),
    ("scaled_epilogue", lambda a, x: (a * x, [a], [x])),
    ("silu_of_eager", lambda a, x: (torch.nn.functional.silu(a), [a], [])),
    ("rms_norm_of_eager_by_a_fixed_weight", lambda a, x: ((a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True))
                                                           * WEIGHT).bfloat16(), [a], [WEIGHT])),
    ("eager_sum_times_a_fixed_weight", lambda a, x: (a * WEIGHT, [a], [WEIGHT])),
    ("output_from_input_beside_a_fixed_table", lambda a, x: (x * 2, [TABLE], [x])),
    ("copy_of_eager", lambda a, x: (a.clone(), [a], [])),
    ("mask_from_input_beside_eager_mask", lambda a, x: (x > 0, [a > 0], [x])),
    ("ids_from_input_beside_eager_ids", lambda a, x: (x.argsort(-1), [a.argsort(-1)], [x])),
    ("small_ints_from_input", lambda a, x: ((x * 2).round().clamp(-2, 2).to(torch.int32),
                                            [(a * 2).round().clamp(-2, 2).to(torch.int32)], [x])),
]  # fmt: skip


@pytest.mark.parametrize("case", [c for _, c in HONEST], ids=[n for n, _ in HONEST])
def test_an_honest_stage_s_residual_varies_with_the_data(case: Case) -> None:
    found = _judged(case)
    assert found is None or found[0] < _decode.DECODE_SHARE / 2, found


def test_a_problem_input_the_same_on_both_draws_is_what_repeats() -> None:
    """An eager sum times a fixed input repeats its ratio; the positions where that input repeats say nothing."""
    found = _judged(HONEST[4][1], inputs=False)
    assert found is not None and found[0] >= 0.98, found


def _bits_fit(y: torch.Tensor, operands: list[torch.Tensor]) -> Any:
    return _decode.fitted(_decode.bound(), y, torch.ones(y.numel(), dtype=torch.bool), operands,
                          torch.Generator().manual_seed(5))  # fmt: skip


@pytest.mark.parametrize(
    ("name", "encode"),
    [
        ("times_odd", lambda s: s * ODD),
        ("times_odd_plus", lambda s: s * ODD + 0x1234567),
        ("int32_times_odd", lambda s: s.to(torch.int32) * 0x2B5E3A17),
    ],
)
def test_an_answer_times_an_odd_constant_is_a_bit_map(name: str, encode: Callable[[Any], Any]) -> None:
    """rt10's F1: slots times an odd 64-bit key, the kernel multiplying by the inverse."""
    slots = _slots(_data(1)[0])
    y = slots.to(torch.int32) if name.startswith("int32") else slots
    mask, share, what, _ = _bits_fit(y, [encode(slots)])
    assert share >= 0.98 and mask is not None and mask.float().mean() >= 0.98, (share, what)
    assert "odd constant" in what


def test_an_honest_integer_output_is_no_odd_multiple() -> None:
    a, x = _data(1)
    found = _bits_fit(_slots(x), [_slots(a)])
    assert found is None or found[1] < _decode.DECODE_SHARE / 2, found


def test_a_kernel_honest_on_the_first_draw_only_is_compared_with_its_previous_draw() -> None:
    """Each draw is compared with the one before it, not with the first (which a submission can tell apart)."""
    d = _keyed.bound(_decode.bound())
    honest, keyed = HONEST[0][1], DECODES[2][1]
    record, found = None, []
    for draw, case in ((1, honest), (2, keyed), (3, keyed)):
        y, operands, given = case(*_data(draw))
        changed = torch.ones(y.numel(), dtype=torch.bool)
        numbered, inputs = list(enumerate(operands)), [(len(operands) + k, g) for k, g in enumerate(given)]
        if record is None:
            record = _keyed.kept(d, y, changed, numbered, inputs, torch.Generator().manual_seed(5))[0]
            continue
        verdict, record = _keyed.judged(d, y, changed, numbered, inputs, record)
        found.append(verdict[0] if verdict else None)
    assert found[0] is not None and found[0] < 0.25 and found[1] is not None and found[1] >= 0.98, found


def test_an_integer_operand_with_one_element_the_dsl_s_keeps_its_bit_maps() -> None:
    """One element a DSL launch wrote used to turn an integer operand into float64 with NaN, taking every bit map
    away (the odd factor, XOR keys): its other elements keep their patterns now."""
    slots = _slots(_data(1)[0]).reshape(-1)
    eager = torch.ones(slots.numel(), dtype=torch.bool)
    eager[0] = False
    operand = _decode.regressor(_decode.bound(), slots * ODD, eager, torch.Generator().manual_seed(1))
    assert operand.dtype == torch.int64
    mask, share, what, _ = _bits_fit(slots, [operand])
    assert share >= 0.98 and mask is not None and "odd constant" in what, (share, what)
