"""The comparison rules of DESIGN §5, on hand-computed cases."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mkbsim.verifier._compare import (
    OutputRef,
    anchor_outputs,
    build_refs,
    compare,
    eps_of,
    promote_to_float64,
)

BF16_EPS = 2.0**-7


def test_eps_of_output_dtypes() -> None:
    assert eps_of(torch.bfloat16) == BF16_EPS
    assert eps_of(torch.float16) == 2.0**-10
    assert eps_of(torch.float32) == 2.0**-23
    assert eps_of(torch.float8_e4m3fn) == 0.125
    assert eps_of(None) == 2.0**-52  # a Python float output


def test_only_half_and_single_precision_inputs_are_promoted() -> None:
    inputs = [
        torch.ones(2, dtype=torch.bfloat16),
        torch.ones(2, dtype=torch.float16),
        torch.ones(2, dtype=torch.float32),
        torch.ones(2, dtype=torch.int32),
        torch.ones(2, dtype=torch.uint8),
        torch.zeros(2, dtype=torch.float8_e4m3fn),
        1.5,
    ]
    out = promote_to_float64(inputs)
    assert [x.dtype for x in out[:6]] == [torch.float64] * 3 + [torch.int32, torch.uint8, torch.float8_e4m3fn]
    assert out[6] == 1.5
    assert out[3] is not inputs[3]  # copies: the anchor run may update in-place inputs


def test_allowance_from_the_eps_term() -> None:
    # The reference agrees with the anchor exactly, so eps(bf16) * max|anchor| decides:
    # 3 * 2^-7 * 4.0 = 0.09375.
    anchor = torch.tensor([1.0, -4.0, 2.0], dtype=torch.float64)
    native = anchor.to(torch.bfloat16)
    (ref,) = build_refs(["out"], [native], [anchor], [torch.bfloat16], factor=3.0)
    assert ref.ref_error == 0.0
    assert ref.eps_term == pytest.approx(BF16_EPS * 4.0)
    assert ref.allowance == pytest.approx(0.09375)
    assert compare(torch.tensor([1.09, -4.0, 2.0]).to(torch.float64), ref).ok
    c = compare(torch.tensor([1.0, -4.1, 2.0], dtype=torch.float64), ref)
    assert not c.ok and c.worst_index == (1,) and c.max_error == pytest.approx(0.1)
    assert c.got == pytest.approx(-4.1) and c.expected == -4.0 and c.mismatches == 1


def test_allowance_from_the_reference_error() -> None:
    # The low-precision reference is off by 0.5 somewhere: 3 * 0.5 = 1.5 beats 3 * eps * 10.
    anchor = torch.tensor([10.0, 1.0], dtype=torch.float64)
    native = torch.tensor([10.0, 1.5], dtype=torch.float32)
    (ref,) = build_refs(["out"], [native], [anchor], [torch.float32], factor=3.0)
    assert ref.ref_error == 0.5
    assert ref.allowance == pytest.approx(1.5)
    assert compare(torch.tensor([11.4, 1.0], dtype=torch.float32), ref).ok
    assert not compare(torch.tensor([11.6, 1.0], dtype=torch.float32), ref).ok


def test_nan_fails_even_within_the_allowance() -> None:
    anchor = torch.tensor([1.0, 2.0], dtype=torch.float64)
    (ref,) = build_refs(["out"], [anchor.float()], [anchor], [torch.float32], factor=3.0)
    c = compare(torch.tensor([1.0, math.nan]), ref)
    assert c.nan and not c.ok and c.worst_index == (1,)


def test_equal_infinities_match_and_opposite_ones_do_not() -> None:
    anchor = torch.tensor([math.inf, -math.inf, 1.0], dtype=torch.float64)
    (ref,) = build_refs(["out"], [anchor.float()], [anchor], [torch.float32], factor=3.0)
    assert compare(torch.tensor([math.inf, -math.inf, 1.0]), ref).ok
    assert not compare(torch.tensor([-math.inf, -math.inf, 1.0]), ref).ok


def test_integer_outputs_must_match_exactly() -> None:
    anchor = torch.tensor([3, 1, 2])
    (ref,) = build_refs(["idx"], [anchor.clone()], [anchor], [torch.int64], factor=3.0)
    assert not ref.is_float and ref.allowance == 0.0
    assert compare(torch.tensor([3, 1, 2]), ref).ok
    c = compare(torch.tensor([3, 2, 2]), ref)
    assert not c.ok and c.exact and c.mismatches == 1 and c.worst_index == (1,)


def test_integer_outputs_may_match_the_native_reference_on_a_tie() -> None:
    # float64 can break a tie differently than the reference's own precision; both are references.
    anchor, native = torch.tensor([0, 1]), torch.tensor([1, 0])
    (ref,) = build_refs(["idx"], [native], [anchor], [torch.int64], factor=3.0)
    assert compare(torch.tensor([1, 0]), ref).ok and compare(torch.tensor([0, 1]), ref).ok
    assert not compare(torch.tensor([1, 1]), ref).ok


def test_anchor_outputs_include_in_place_inputs_after_the_call() -> None:
    def reference(cache: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        cache[:2] = values
        return values * 2

    cache = torch.zeros(4, dtype=torch.bfloat16)
    values = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    native = anchor_outputs(reference, [cache, values], 1, [0], promote=False)
    anchor = anchor_outputs(reference, [cache, values], 1, [0], promote=True)
    assert native[1].dtype == torch.bfloat16 and anchor[1].dtype == torch.float64
    assert anchor[1].tolist() == [1.0, 2.0, 0.0, 0.0]
    assert cache.tolist() == [0.0, 0.0, 0.0, 0.0]  # the caller's inputs are untouched


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=16), st.integers(0, 2))
def test_the_anchor_itself_always_passes_and_the_allowance_is_never_below_the_eps_term(
    values: list[float], which: int
) -> None:
    dtype = (torch.bfloat16, torch.float16, torch.float32)[which]
    anchor = torch.tensor(values, dtype=torch.float64)
    (ref,) = build_refs(["out"], [anchor.to(dtype)], [anchor], [dtype], factor=3.0)
    assert ref.allowance >= 3.0 * eps_of(dtype) * float(anchor.abs().max()) * (1 - 1e-12)
    assert compare(anchor.to(dtype), ref).ok


def test_a_reference_overflow_does_not_open_the_allowance() -> None:
    anchor = torch.tensor([70000.0, 1.0], dtype=torch.float64)
    native = torch.tensor([math.inf, 1.0], dtype=torch.float16)  # float16 overflows, float64 does not
    (ref,) = build_refs(["out"], [native], [anchor], [torch.float16], factor=3.0)
    assert math.isfinite(ref.allowance)
    assert ref.allowance == pytest.approx(3 * 2.0**-10 * 70000.0)  # from the finite anchor only
    assert not compare(torch.tensor([70000.0, 500.0], dtype=torch.float64), ref).ok


def _fp8_ref(anchor: list[float], native: list[float] | None = None) -> OutputRef:
    a = torch.tensor(anchor, dtype=torch.float64).to(torch.float8_e4m3fn)
    n = torch.tensor(native if native is not None else anchor, dtype=torch.float64).to(torch.float8_e4m3fn)
    return build_refs(["cache"], [n], [a], [torch.float8_e4m3fn], 3.0)[0]


def test_fp8_outputs_are_judged_in_their_own_steps() -> None:
    """e4m3 (DESIGN §5, per element for fp8): 3 steps of each expected code, not 3 · eps · max|anchor| = 168 of 448."""
    ref = _fp8_ref([448.0, 160.0, 1.0, -20.0])
    fp8 = torch.float8_e4m3fn
    assert compare(torch.tensor([448.0, 160.0, 1.0, -20.0]).to(fp8), ref).ok
    assert compare(torch.tensor([416.0, 176.0, 1.125, -22.0]).to(fp8), ref).ok  # one step off each
    ternary = compare(torch.tensor([320.0, 320.0, 0.0, 0.0]).to(fp8), ref)  # within 168 everywhere
    assert not ternary.ok and ternary.mismatches == 4 and ternary.expected == 160.0 and ternary.allowance == 48.0


def test_fp8_small_codes_beside_large_ones_are_judged_at_what_the_sums_are_exact_to() -> None:
    """p56 on an H100: an honest fp8 tensor-core sum moves a code near 0.05 by 3 to 4.5 of its steps (0.004) in a row
    reaching ~200; 3 x 2^-12 x max|anchor| admits that, not a code off by a step of the large values."""
    fp8 = torch.float8_e4m3fn
    ref = _fp8_ref([192.0, 0.04296875, -0.0859375, 20.0])
    assert ref.per_element is not None and float(ref.per_element[1]) == 3 * 192.0 / 4096
    assert compare(torch.tensor([192.0, 0.025390625, -0.0625, 20.0]).to(fp8), ref).ok  # 4.5 and 3 of their steps
    assert not compare(torch.tensor([192.0, 0.04296875, -0.0859375, 12.0]).to(fp8), ref).ok  # 4 steps of 20: wrong
    assert not compare(torch.tensor([192.0, 0.25, -0.0859375, 20.0]).to(fp8), ref).ok  # a small code off by 0.2


def test_fp8_steps_are_exact_powers_of_two() -> None:
    """Three steps off is within three steps, in every binade (the step is made by ldexp, not pow)."""
    fp8 = torch.float8_e4m3fn
    codes = torch.tensor([2.0**e * 1.375 for e in range(-6, 8)], dtype=torch.float64)
    ref = build_refs(["cache"], [codes.to(fp8)], [codes.to(fp8)], [fp8], 3.0)[0]
    steps = torch.tensor([0.125 * 2.0**e for e in range(-6, 8)], dtype=torch.float64)
    assert ref.per_element is not None and torch.equal(ref.per_element, torch.maximum(3 * steps, ref.per_element.min()))
    assert compare((codes - 3 * steps).to(fp8), ref).ok
    assert not compare((codes - 4 * steps).to(fp8), ref).ok


def test_fp8_subnormals_flushed_to_zero_pass_and_the_reference_error_counts_per_element() -> None:
    fp8 = torch.float8_e4m3fn
    assert compare(torch.tensor([0.0, 1.0]).to(fp8), _fp8_ref([2.0**-7, 1.0])).ok  # a subnormal code flushed
    assert not compare(torch.tensor([0.0, 1.0]).to(fp8), _fp8_ref([2.0**-5, 1.0])).ok  # a normal one is not
    # the reference itself off by 4 steps of 16 at the second element: 3 x 64 there, 3 steps elsewhere
    ref = _fp8_ref([1.0, 128.0], native=[1.0, 192.0])
    assert compare(torch.tensor([1.0, 320.0]).to(fp8), ref).ok
    assert not compare(torch.tensor([2.0, 128.0]).to(fp8), ref).ok
