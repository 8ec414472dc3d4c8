"""Decodes keyed by the element's position (verifier README "Decoded answers", red team round 10's F2 and F4).

The decode rule (``_decode``) fits maps of a launch's operands. A kernel that decodes an eager answer with a key it
computes from each element's index (``out[i] = e[i] XOR h(i)``, ``e[i] + r(i)``, ``e[i] · s(i)``, h a hash of i) has no
operand to fit: the key is in no tensor. But such a key does not depend on the data: at the same positions, the
residual of the output against the operand it was decoded from (``y XOR e`` on the bit patterns, ``y - e`` modulo the
width, ``y · e⁻¹`` for odd patterns, ``y - e`` and ``y / e`` on the values) is the same on every correctness draw, while
an honest kernel's residual varies with the data. So the vault keeps, for each launch's output on the first audited
draw, a sample of positions with the output's and each lined-up operand's elements there (``kept``), and on every later
draw asks whether the residual the previous draw left predicts this draw's output from this draw's operand, then keeps
this draw's elements at the same positions for the next (``judged``).

What is not judged, as it says nothing: positions where the launch did not change the output on this draw, where the
operand has the same element on both draws (a constant table, zeros, the sentinel of fresh memory) or is not
eager-made (NaN); and a residual form that a map of a problem input explains where that input (lined up with the
output, read by the launch) has the same element on both draws (an RMSNorm weight the problem makes the same on every
draw: an honest epilogue scaling an eager sum by it repeats its residual; a hash of the position is no map of it,
``_explained``). Every form is scored against chance (the kept residual of another position), with no verdict where
chance is above ``KEYED_CHANCE`` (a residual of few values: a copy's zeros, which the copy checks and the decode
rule's maps judge).

Everything here runs inside the worker, as ``_decode``: only the functions of ``_decode.bound()`` (with the few
constants ``bound`` adds) are called, and tensors are compared with tensors or integers.
"""

from __future__ import annotations

import types
from typing import Any

from mkbsim.verifier._decode import _held, _interpolated, _rolled, _score, _table, inverse, lined_up

#: Positions kept per launch output (drawn among the elements the launch changed on the first audited draw).
KEYED_SAMPLES = 1024
#: Elements the vault keeps for all launches together (positions, the output's and the operands' elements, as bit
#: patterns and values): past it, a launch's output first seen is not kept (32 MiB of int64 and float64).
KEYED_BUDGET = 1 << 21
#: No verdict where the kept residuals of two different positions agree this often (few distinct residuals).
KEYED_CHANCE = 0.75


def bound(decode: Any) -> types.SimpleNamespace:
    """``_decode``'s bound functions with this rule's constants."""
    return types.SimpleNamespace(
        **vars(decode), keyed_samples=KEYED_SAMPLES, keyed_budget=KEYED_BUDGET, keyed_chance=KEYED_CHANCE
    )


def kept(d: Any, t: Any, changed: Any, operands: Any, inputs: Any, generator: Any) -> Any:
    """What a draw keeps of the launch's output ``t`` (``changed``: flat bool, the elements it changed) for the next
    draw: positions drawn among the changed elements, ``t``'s elements there and each lined-up operand's and input's
    (``operands``, ``inputs``: (argument number, values before the launch)); with how many elements that holds. None
    where no operand lines up or too few elements changed."""
    lined = _lined(d, t, operands)
    if not lined or d.is_complex(t):
        return None
    where = d.reshape(d.nonzero(changed), (-1,))
    n = d.numel(where)
    if n < d.least:
        return None
    drawn = d.sort(d.randint(0, n, (d.keyed_samples,), generator=generator, device=generator.device))[0]
    # each position once (a small output's would repeat, and a repeated one would match itself), in random order
    drawn = d.masked_select(drawn, d.cat([d.ones_like(drawn[:1], dtype=d.bool_), d.ne(drawn[1:], drawn[:-1])]))
    drawn = d.take(drawn, d.randperm(d.numel(drawn), generator=generator, device=generator.device))
    at = d.take(where, d.to(drawn, d.device_of(where)))
    fixed = _lined(d, t, inputs)
    record = (at, _sample(d, d.reshape(t, (-1,)), at), _sampled(d, lined, at), _sampled(d, fixed, at), d.numel(t))
    return record, d.keyed_samples * (2 + 2 * (d.len(lined) + d.len(fixed)))


def judged(d: Any, t: Any, changed: Any, operands: Any, inputs: Any, record: Any) -> Any:
    """How well the residual ``record`` kept on the previous draw predicts this draw's output ``t`` from this draw's
    operand at the same positions: the best residual form's score (beyond chance) and its description, or None where
    no form is judged (too few positions say anything); with what this draw keeps at those positions for the next
    (so that a kernel decoding with one key on every draw but the first is compared with itself)."""
    at, y_then, then, fixed_then, size = record
    if d.numel(t) != size or d.is_complex(t):
        return None, record
    y_now = _sample(d, d.reshape(t, (-1,)), at)
    usable = d.take(changed, at)
    fixed_now = _sampled(d, _lined(d, t, inputs), at)
    # the inputs whose elements repeat between the draws: their values, and where they repeat
    fixed = [(v[1], d.eq(fixed_now[k][0], v[0])) for k, v in fixed_then.items() if k in fixed_now]
    now = _sampled(d, _lined(d, t, operands), at)
    floating = d.is_floating(y_now[2])
    best: Any = None
    for k, e_then in then.items():
        e_now = now.get(k)
        if e_now is None or d.dtype_of(e_now[2]) != d.dtype_of(e_then[2]):
            continue
        for score, what in _forms(d, (y_then, y_now), (e_then, e_now), usable, fixed, floating):
            if best is None or score > best[0]:
                # (the verifier's sentence goes on: "... of its operands that eager code made")
                best = (score, f"a key of each element's position (the output's {what} operand {k}'s, the same on "
                               "two correctness draws) combined with one")  # fmt: skip
    return best, (at, y_now, now, fixed_now, size)


def _lined(d: Any, t: Any, tensors: Any) -> Any:
    """Each of ``tensors`` (argument number, values) that lines up with ``t``: (argument number, flat in its order)."""
    found = []
    for k, r in tensors:
        if not d.is_complex(r):
            flat = lined_up(d, r, t)
            if flat is not None:
                found.append((k, flat))
    return found


def _sampled(d: Any, lined: Any, at: Any) -> Any:
    """``_lined``'s tensors sampled at ``at``, by argument number."""
    return {k: _sample(d, flat, at) for k, flat in lined}


def _sample(d: Any, flat: Any, at: Any) -> Any:
    """``flat``'s elements at ``at``: their bit patterns (non-negative int64 but for 8-byte ones), their values
    (float64), and the values in their own dtype (for its kind)."""
    width = d.element_size(flat)
    own = d.take(d.view(flat, d.ints[width]), at)  # (fp8 and unsigned types have no take of their own on cuda)
    bits = d.to(own, d.int64)
    if width < 8:
        bits = d.bitwise_and(bits, (1 << (8 * width)) - 1)
    values = d.view(own, d.dtype_of(flat))
    return bits, d.to(values, d.float64), values


def _forms(d: Any, y: Any, e: Any, usable: Any, fixed: Any, floating: bool) -> Any:
    """(score, name) of each residual form of output ``y`` against operand ``e`` (each: (then, now) samples) at the
    ``usable`` positions where the operand's element differs between the draws, but for forms whose residual a map
    of a problem input that repeats between the draws explains (``fixed``: its values, where it repeats)."""
    (y_then, y_now), (e_then, e_now) = y, e
    keep = d.logical_and(usable, d.ne(e_then[0], e_now[0]))
    for v in (e_then[1], e_now[1], y_then[1], y_now[1]):  # eager-made (not NaN) and finite
        keep = d.logical_and(keep, d.isfinite(v))
    if d.int(d.sum(keep)) < d.least:
        return []
    where = d.reshape(d.nonzero(keep), (-1,))
    yb0, yb1, eb0, eb1 = (d.take(s[0], where) for s in (y_then, y_now, e_then, e_now))
    yv0, yv1, ev0, ev1 = (d.take(s[1], where) for s in (y_then, y_now, e_then, e_now))
    fixed = [(d.take(w, where), d.take(repeats, where)) for w, repeats in fixed]
    found = []
    width = d.element_size(y_now[2])
    if d.element_size(e_now[2]) == width:  # the bit patterns, modulo the width
        low = (1 << (8 * width)) - 1 if width < 8 else -1
        for name, residual in (
            ("bits XOR", lambda yb, eb: d.bitwise_xor(yb, eb)),
            ("bits minus", lambda yb, eb: d.bitwise_and(d.sub(yb, eb), low)),
        ):
            then = residual(yb0, eb0)
            if not _explained(d, d.to(then, d.float64), fixed, 0.0, 0.0):
                found.append(_exact(d, then, residual(yb1, eb1), name))
        odd = d.nonzero(d.logical_and(d.eq(d.bitwise_and(eb0, 1), 1), d.eq(d.bitwise_and(eb1, 1), 1)))
        odd = d.reshape(odd, (-1,))
        if d.numel(odd) >= d.least:  # y · e⁻¹ where both draws' patterns are odd (invertible)
            ratios = [
                d.bitwise_and(d.mul(d.take(yb, odd), inverse(d, d.take(eb, odd))), low)
                for yb, eb in ((yb0, eb0), (yb1, eb1))
            ]
            taken = [(d.take(w, odd), d.take(repeats, odd)) for w, repeats in fixed]
            if not _explained(d, d.to(ratios[0], d.float64), taken, 0.0, 0.0):
                found.append(_exact(d, ratios[0], ratios[1], "bits times the inverse of"))
    if floating:  # the values: the kept residual applied to this draw's operand, within a few of the output's epsilons
        eps = d.eps.get(d.dtype_of(y_now[2]), d.eps[d.float32])
        scale = d.float(d.amax(d.abs(yv1)))
        # a decode's two roundings are half an epsilon of each draw's element at most (relative: none near zero), so
        # twice that; the maps' width (2 epsilons of one element, and half one of the largest) would hold a residual
        # an eager statistic moves by a few percent between the draws (an eager sum's RMS)
        allowed = d.mul(d.add(d.abs(yv0), d.abs(yv1)), eps)
        for name, residual, applied in (
            ("difference from", d.sub(yv0, ev0), d.add),
            ("ratio to", d.div(yv0, ev0), d.mul),
        ):
            if _explained(d, residual, fixed, d.max(d.ulps * eps, d.rtol_floor), d.abs_ulps * eps * scale):
                continue
            held = d.le(d.abs(d.sub(applied(ev1, residual), yv1)), allowed)
            chance = d.le(d.abs(d.sub(applied(ev1, d.roll(residual, 1)), yv1)), allowed)
            found.append(_scored(d, held, chance, name))
    return [f for f in found if f is not None]


def _explained(d: Any, residual: Any, fixed: Any, relative: float, tolerance: float) -> bool:
    """Whether a univariate map of a problem input (``fixed``: its values, where they repeat between the draws) holds
    the kept ``residual`` where the input repeats, beyond chance, learned on half of those positions and judged on the
    other half (the decode rule's interpolation): an honest stage by a fixed input (an eager sum times an RMSNorm
    weight the problem makes the same on every draw) repeats its residual, a key of the position is no map of it."""
    for w, repeats in fixed:
        where = d.reshape(d.nonzero(repeats), (-1,))
        half = d.numel(where) // 2
        if half < d.least // 2:
            continue
        x, r = d.take(w, where), d.take(residual, where)
        table = _table(d, x[:half], r[:half])
        if table is None:
            continue
        checked, target = x[half : 2 * half], r[half : 2 * half]
        # a flat ``tolerance`` (not the table's terms: a residual is a difference or ratio of two draws' values)
        mapped = _flat(d, _interpolated(d, table, checked))
        held = _held(d, mapped, target, relative, (tolerance, 1.0))
        chance = _held(d, _rolled(d, mapped), target, relative, (tolerance, 1.0))
        if _score(d, held, chance)[0] >= d.share:
            return True
    return False


def _exact(d: Any, then: Any, now: Any, name: str) -> Any:
    """The exact residual form: the same residual on both draws, against another position's."""
    return _scored(d, d.eq(then, now), d.eq(d.roll(then, 1), now), name)


def _scored(d: Any, held: Any, chance: Any, name: str) -> Any:
    """(score beyond chance, name), or None where chance alone agrees more than ``KEYED_CHANCE``."""
    share, by_chance = d.float(d.mean(d.to(held, d.float64))), d.float(d.mean(d.to(chance, d.float64)))
    if by_chance > d.keyed_chance:
        return None
    return (share - by_chance) / (1.0 - by_chance), name


def _flat(d: Any, mapped: Any) -> Any:
    """A map's values with a unit magnitude of terms: ``_held``'s absolute tolerance taken as is."""
    return mapped[0], d.ones_like(mapped[0])
