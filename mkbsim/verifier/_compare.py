"""Float64-anchored comparison (DESIGN §5): anchors, allowances and per-output checks.

Runs in the verifier's process only; the candidate never sees an anchor.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

#: dtypes the anchor run promotes to float64; every other input passes unchanged.
ANCHOR_PROMOTED = (torch.float16, torch.bfloat16, torch.float32)


def clone_inputs(inputs: Sequence[Any]) -> list[Any]:
    """Private copies (tensors keep their strides; scalars are immutable)."""
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def promote_to_float64(inputs: Sequence[Any]) -> list[Any]:
    return [
        x.to(torch.float64) if isinstance(x, torch.Tensor) and x.dtype in ANCHOR_PROMOTED
        else (x.clone() if isinstance(x, torch.Tensor) else x)
        for x in inputs
    ]  # fmt: skip


def as_output_list(result: Any, n_outputs: int) -> list[Any]:
    """The reference's return value as a list (one output → a bare value, several → a tuple)."""
    if n_outputs == 1:
        return [result]
    if not isinstance(result, tuple) or len(result) != n_outputs:
        raise TypeError(f"the reference returned {type(result).__name__}, expected a tuple of {n_outputs}")
    return list(result)


def eps_of(dtype: torch.dtype | None) -> float:
    """Machine epsilon of a floating dtype (Python floats count as float64)."""
    return float(torch.finfo(dtype if dtype is not None else torch.float64).eps)


def is_float_value(x: Any) -> bool:
    if isinstance(x, torch.Tensor):
        return x.dtype.is_floating_point
    return isinstance(x, float)


def _as_tensor(x: Any, device: torch.device | None = None) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    return torch.tensor(x, device=device)


def _abs_diff(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """|a − b| in float64, zero where both are the same infinity."""
    a64, b64 = a.to(torch.float64), b.to(torch.float64)
    diff = (a64 - b64).abs()
    return torch.where(a64 == b64, torch.zeros_like(diff), diff)


def _max_or_zero(t: torch.Tensor) -> float:
    return float(t.max()) if t.numel() else 0.0


@dataclass(frozen=True)
class OutputRef:
    """What one output (or in-place input) must match, with its allowance."""

    label: str
    anchor: Any
    native: Any
    dtype: torch.dtype | None
    is_float: bool
    ref_error: float
    eps_term: float  # eps(out dtype) · max|anchor|
    allowance: float  # the largest element's, where ``per_element`` is set
    #: For a one-byte float output (fp8), each flat element's own allowance (``fp8_allowances``); else None.
    per_element: torch.Tensor | None = None


def build_refs(
    labels: Sequence[str],
    native: Sequence[Any],
    anchor: Sequence[Any],
    dtypes: Sequence[torch.dtype | None],
    factor: float,
) -> list[OutputRef]:
    """allowance = factor · max(ref_error, eps(out dtype) · max|anchor|) for float outputs."""
    refs = []
    for label, nat, anc, dtype in zip(labels, native, anchor, dtypes, strict=True):
        if not is_float_value(nat):
            refs.append(OutputRef(label, anc, nat, dtype, False, 0.0, 0.0, 0.0))
            continue
        anc_t = _as_tensor(anc)
        nat_t = _as_tensor(nat, anc_t.device)
        # Only finite values scale the allowance: an infinite anchor element must be matched
        # exactly (compare() sees an infinite error otherwise), and a reference that overflows
        # somewhere in low precision must not make every error acceptable.
        diff = _abs_diff(nat_t, anc_t)
        ref_error = _max_or_zero(diff[torch.isfinite(diff)])
        anc64 = anc_t.to(torch.float64)
        eps_term = eps_of(dtype) * _max_or_zero(anc64[torch.isfinite(anc64)].abs())
        allowance = factor * max(ref_error, eps_term)
        per_element = None
        if dtype is not None and is_one_byte_float(dtype):
            per_element = fp8_allowances(diff, anc64, dtype, factor)
            allowance = _max_or_zero(per_element)
        refs.append(OutputRef(label, anc, nat, dtype, True, ref_error, eps_term, allowance, per_element))
    return refs


def is_one_byte_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point and dtype.itemsize == 1


#: An fp8 output's sums before their last rounding are exact to about this share of its largest value, not better: an
#: fp8 tensor core keeps ~14 bits of its accumulator (Hopper; DeepSeek-V3 §3.3.2), so a small code beside large ones
#: moves by several of its own steps where the float32 reference lands on it exactly (p56 on an H100: 3 to 4.5 steps
#: of a code near 0.05 in a row reaching ~200, both DSLs; benchmarks/fp8_output_errors.py). One part in 4096 of the
#: largest value is 32 times below the rule for two-byte floats (3 · eps(bf16) · max|anchor|) and far below a code
#: off its grid (a grid of 64 is off by up to 32 of 448).
FP8_SUM_PRECISION = 2.0**-12


def fp8_allowances(ref_diff: torch.Tensor, anchor: torch.Tensor, dtype: torch.dtype, factor: float) -> torch.Tensor:
    """Each element's allowance of a one-byte float output (DESIGN §5, per element for fp8): the contract's
    ``factor · max(ref_error, eps · |anchor|)`` taken per element, in the element's own rounding steps, with what the
    sums before the rounding are exact to as a third term (``factor · FP8_SUM_PRECISION · max|anchor|``), and never
    below the smallest normal. An fp8
    format has 8 (e4m3) or 4 (e5m2) steps per binade, so ``eps · max|anchor|`` is a third of the whole range (e4m3:
    168 of 448): a ternary code passed, and old codes left in a cache were "correct". Here ``ref_error`` is the
    reference's own error at the element and the step ``eps · 2^floor(log2 |anchor_i|)`` (the subnormal step below the
    smallest normal), made with ``ldexp``: exact on every device (``pow(2, e)`` on cuda is not, and 3 steps fell a
    hair under 3 steps); the smallest normal is the most a conversion flushing subnormals to zero is off by (TVM's
    llvm fp8 cast does), 1/28672 of e4m3's range. An infinite or NaN anchor element gets 0 (matched exactly). Flat,
    float64."""
    info = torch.finfo(dtype)
    flat = anchor.reshape(-1)
    finite = torch.isfinite(flat)
    magnitude = flat.abs().clamp_min(info.smallest_normal)
    _, exponent = torch.frexp(magnitude)  # magnitude = m · 2^exponent, m in [0.5, 1)
    step = torch.ldexp(torch.full_like(magnitude, info.eps), exponent - 1)
    summed = FP8_SUM_PRECISION * _max_or_zero(flat[finite].abs())
    own_error = torch.where(torch.isfinite(ref_diff), ref_diff, torch.zeros_like(ref_diff)).reshape(-1)
    allowance = factor * torch.maximum(own_error.to(torch.float64), step).clamp_min(summed)
    allowance = allowance.clamp_min(info.smallest_normal)
    return torch.where(finite, allowance, torch.zeros_like(allowance))


def anchor_outputs(
    reference: Callable[..., Any],
    inputs: Sequence[Any],
    n_outputs: int,
    inplace_positions: Sequence[int],
    promote: bool,
) -> list[Any]:
    """Run the reference on copies of ``inputs`` (promoted to float64 for the anchor); the
    outputs, then the in-place inputs as they stand after the call."""
    args = promote_to_float64(inputs) if promote else clone_inputs(inputs)
    outs = as_output_list(reference(*args), n_outputs)
    return outs + [args[i] for i in inplace_positions]


@dataclass(frozen=True)
class Check:
    """The comparison of one output against its reference."""

    label: str
    ok: bool
    nan: bool
    max_error: float
    allowance: float
    ref_error: float
    eps_term: float
    exact: bool
    mismatches: int
    worst_index: tuple[int, ...] | None
    got: float | None
    expected: float | None
    per_element: bool = False  # the allowance is the worst element's own (a one-byte float output)

    def as_dict(self) -> dict[str, Any]:
        return {
            "output": self.label,
            "ok": self.ok,
            "nan": self.nan,
            "max_error": self.max_error if math.isfinite(self.max_error) else str(self.max_error),
            "allowance": self.allowance,
            "ref_error": self.ref_error,
            "eps_term": self.eps_term,
            "exact": self.exact,
            "mismatches": self.mismatches,
            "worst_index": list(self.worst_index) if self.worst_index is not None else None,
            "got": self.got,
            "expected": self.expected,
        }


def _unravel(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    idx = []
    for size in reversed(shape):
        idx.append(flat % size if size else 0)
        flat //= size if size else 1
    return tuple(reversed(idx))


def compare(out: Any, ref: OutputRef) -> Check:
    """Float outputs: max|out − anchor| ≤ allowance and no NaN. Others: exactly equal to the anchor
    (or to the reference's own output, which the float64 run can only differ from on ties)."""
    out_t = _as_tensor(out)
    anc_t = _as_tensor(ref.anchor, out_t.device)
    shape = tuple(out_t.shape)
    if ref.is_float:
        nan_mask = torch.isnan(out_t)
        has_nan = bool(nan_mask.any())
        diff = _abs_diff(out_t, anc_t)
        diff = torch.where(nan_mask, torch.full_like(diff, math.inf), diff)
        limit = _allowance(ref, diff.device)
        limit = limit.reshape(diff.shape) if isinstance(limit, torch.Tensor) else torch.full_like(diff, limit)
        over = diff > limit
        at = int((diff - limit).argmax()) if diff.numel() else 0  # the worst element: the largest excess
        max_error = float(diff.flatten()[at]) if diff.numel() else 0.0
        bound = float(limit.flatten()[at]) if diff.numel() else ref.allowance
        worst = _unravel(at, shape) if diff.numel() else None
        ok = not has_nan and not bool(over.any())
        got = float(out_t.to(torch.float64).flatten()[at]) if diff.numel() else None
        expected = float(anc_t.to(torch.float64).flatten()[at]) if diff.numel() else None
        return Check(ref.label, ok, has_nan, max_error, bound, ref.ref_error, ref.eps_term,
                     False, int(over.sum()), worst, got, expected, ref.per_element is not None)  # fmt: skip
    nat_t = _as_tensor(ref.native, out_t.device)
    equal_anchor = out_t.shape == anc_t.shape and bool(torch.equal(out_t, anc_t.to(out_t.dtype)))
    equal_native = out_t.shape == nat_t.shape and bool(torch.equal(out_t, nat_t.to(out_t.dtype)))
    if equal_anchor or equal_native:
        return Check(ref.label, True, False, 0.0, 0.0, 0.0, 0.0, True, 0, None, None, None)
    wrong = out_t != anc_t.to(out_t.dtype)
    first = _unravel(int(wrong.flatten().nonzero()[0]), shape) if bool(wrong.any()) else None
    got = float(out_t[first]) if first is not None else None
    expected = float(anc_t[first]) if first is not None else None
    return Check(ref.label, False, False, math.inf, 0.0, 0.0, 0.0, True, int(wrong.sum()), first, got, expected)


def _allowance(ref: OutputRef, device: torch.device) -> torch.Tensor | float:
    """The allowance ``diff`` is compared with: per flat element for a one-byte float output, else one number."""
    return ref.per_element.to(device) if ref.per_element is not None else ref.allowance


def wrong_mask(out: Any, ref: OutputRef) -> torch.Tensor:
    """Elementwise: where ``out`` breaks the rule ``compare`` applies (flattened; NaN is always wrong)."""
    out_t = _as_tensor(out).reshape(-1)
    anc_t = _as_tensor(ref.anchor, out_t.device).reshape(-1)
    if ref.is_float:
        diff = _abs_diff(out_t, anc_t)
        return torch.isnan(out_t.to(torch.float64)) | (diff > _allowance(ref, diff.device))
    nat_t = _as_tensor(ref.native, out_t.device).reshape(-1)
    return (out_t != anc_t.to(out_t.dtype)) & (out_t != nat_t.to(out_t.dtype))


#: Sampled values "are" the answer where they agree with the anchor to a few roundings of the output dtype,
#: relatively (an absolute allowance would let any small value match a small anchor element).
MATCH_ULPS = 2
MATCH_RTOL_FLOOR = 1e-4


def matches(values: Any, ref: OutputRef, positions: torch.Tensor) -> torch.Tensor:
    """Elementwise: whether sampled ``values`` (at flat ``positions``) are the anchor's values."""
    got = torch.as_tensor(values, dtype=torch.float64)
    anchor = _as_tensor(ref.anchor).reshape(-1)[positions].to(torch.float64).cpu()
    if ref.is_float:
        rtol = max(MATCH_ULPS * eps_of(ref.dtype), MATCH_RTOL_FLOOR)
        return ~torch.isnan(got) & ((got == anchor) | ((got - anchor).abs() <= rtol * anchor.abs()))
    native = _as_tensor(ref.native).reshape(-1)[positions].to(torch.float64).cpu()
    return (got == anchor) | (got == native)
