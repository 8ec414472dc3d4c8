"""The decode rule (DESIGN §5, verifier README "Decoded answers"): what a DSL launch adds to the data it reads.

An eager answer kept in an encoded form (×3, offset by a fixed random tensor, a table's entries) and decoded by a
kernel element by element leaves every output element written by the DSL, while the DSL adds nothing the eager
code had not computed. On a correctness draw, after each launch, the vault (``_provenance``) asks here whether
the elements the launch changed are recoverable, within the verifier's allowance, from the launch's operands that
are neither problem inputs (nor copies of them) nor the DSL's own data (eager-made tensors, the submission's
constants and tables, the launch's own buffers as they were before it) by a simple element-wise map:

* any univariate map of one such operand (or of the sum, difference, product or ratio of two), learned by
  piecewise-linear interpolation on one random sample of the changed elements and judged on another (a global
  affine map, a monotone or any smooth unary function, a table lookup of a code);
* a global affine map of two operands (least squares on the first sample, judged on the second).

Problem inputs are never regressors: an honest epilogue (eager GEMM, DSL scales by the problem's per-row and
per-column scales, adds its bias or residual) depends on them in a way the eager operands alone do not fix.
Where the best map holds on at least ``DECODE_SHARE`` of the held-out sample, the changed elements it holds for
are not the DSL's (the vault withdraws their credit, so derived credit does not flow from them either); the
others keep theirs (a kernel computing some elements honestly keeps those). One record per judged launch tells
the verifier what was found.

Everything here runs inside the submission's worker: the functions use only the C functions bound in the
namespace ``bound()`` makes before the submission exists (no module global or builtin is looked up at run time).
"""

from __future__ import annotations

import types
from typing import Any

import torch

#: A launch's changed elements are a decoded eager answer where the best map holds on this share of the held-out
#: sample: honest kernels reading eager data and problem inputs hold by chance on a few percent (README figures).
DECODE_SHARE = 0.5
#: The map holds on an element within this many of the launch output's dtype epsilons of the element's own
#: magnitude (a decode is off by its output's rounding, half an epsilon, and its float32 arithmetic's) ...
DECODE_ULPS = 2.0
#: ... or this share of it, whichever is more: a smooth non-affine decode (an exp) learned by interpolation on a
#: sample is good to about this much, which float32 epsilons would refuse ...
DECODE_RTOL_FLOOR = 2.0**-10
#: ... plus this many epsilons of the sample's largest magnitude (elements near zero). Tighter than the verifier's
#: allowance (3 epsilons of the largest magnitude): at that width an honest bfloat16 epilogue scaling an eager GEMM
#: by the problem's scales was held on 60% of its elements (an answer hidden under noise as wide as the allowance
#: escapes: README "Known limits").
DECODE_ABS_ULPS = 0.5
#: Elements in each of the two samples (fit, held out).
DECODE_SAMPLES = 2048
#: Launch outputs with fewer changed elements are not judged (a scalar, a row of statistics).
DECODE_MIN_ELEMENTS = 64
#: The operands tried as regressors, largest first.
DECODE_OPERANDS = 6


def bound() -> types.SimpleNamespace:
    """The C functions ``fitted`` calls, bound before the submission loads."""
    fns = torch._C._VariableFunctions
    base = torch._C.TensorBase
    return types.SimpleNamespace(
        len=len, range=range, min=min, max=max, int=int, float=float, tuple=tuple, list=list, sorted=sorted,
        str=str,
        to=base.to, reshape=base.reshape, numel=base.numel, size=base.size, dim=base.dim, take=base.take,
        abs=base.abs, amax=base.amax, sub=base.sub, add=base.add, mul=base.mul, div=base.div, le=base.le,
        ne=base.ne, logical_and=base.logical_and, logical_or=base.logical_or, logical_not=base.logical_not,
        isfinite=fns.isfinite, nonzero=base.nonzero, sum=base.sum, all=base.all, clamp=base.clamp, where=fns.where,
        searchsorted=fns.searchsorted, sort=base.sort, randperm=fns.randperm, stack=fns.stack,
        ones_like=fns.ones_like, zeros_like=fns.zeros_like, cat=fns.cat, eq=base.eq,
        minimum=fns.minimum, maximum=fns.maximum, broadcast_to=fns.broadcast_to, transpose=base.transpose,
        masked_select=fns.masked_select,
        lstsq=torch.linalg.lstsq, zeros=fns.zeros, index_put_=base.index_put_,
        is_floating=base.is_floating_point, is_complex=base.is_complex, dtype_of=base.__dict__["dtype"].__get__,
        device_of=base.__dict__["device"].__get__, float64=torch.float64, float32=torch.float32, bool_=torch.bool,
        eps={dtype: torch.finfo(dtype).eps for dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16,
                                                         torch.float8_e4m3fn, torch.float8_e5m2)},
        share=DECODE_SHARE, ulps=DECODE_ULPS, rtol_floor=DECODE_RTOL_FLOOR, abs_ulps=DECODE_ABS_ULPS,
        samples=DECODE_SAMPLES, least=DECODE_MIN_ELEMENTS, operands=DECODE_OPERANDS,
    )  # fmt: skip


def _aligned(d: Any, r: Any, t: Any) -> Any:
    """``r`` element by element with ``t``'s logical order (float64, flat), or None: the same number of elements,
    the transpose of a matrix, or a broadcast."""
    if d.numel(r) == d.numel(t):
        shape = d.tuple(d.size(r))
        if d.dim(t) == 2 and d.len(shape) == 2 and shape == d.tuple(d.size(t))[::-1] and shape[0] != shape[1]:
            r = d.transpose(r, 0, 1)
        return d.reshape(d.to(r, d.float64), (-1,))
    shape, target = d.tuple(d.size(r)), d.tuple(d.size(t))
    if d.len(shape) > d.len(target) or d.numel(r) < 2:
        return None
    for k in d.range(1, d.len(shape) + 1):  # broadcastable: each trailing size 1 or the target's
        if shape[-k] != 1 and shape[-k] != target[-k]:
            return None
    return d.reshape(d.to(d.broadcast_to(r, target), d.float64), (-1,))


def _feature(d: Any, columns: Any, key: Any) -> Any:
    """One regressor: an operand (``key`` (i, None, "")) or two combined by ``key[2]``."""
    i, j, how = key
    a = columns[i]
    if j is None:
        return a
    b = columns[j]
    return d.add(a, b) if how == "+" else d.sub(a, b) if how == "-" else d.mul(a, b) if how == "*" else d.div(a, b)


def _keys(d: Any, count: int) -> Any:
    """Each operand, and the sum, difference, product and both ratios of each pair."""
    found = [(i, None, "") for i in d.range(count)]
    for i in d.range(count):
        for j in d.range(i + 1, count):
            found += [(i, j, "+"), (i, j, "-"), (i, j, "*"), (i, j, "/"), (j, i, "/")]
    return found


def _named(key: Any) -> str:
    i, j, how = key
    return f"operand {i}" if j is None else f"operand {i} {how} operand {j}"


def _table(d: Any, x: Any, y: Any) -> Any:
    """The sample (x, y) as an interpolation table, finite points only, sorted by x."""
    keep = d.logical_and(d.isfinite(x), d.isfinite(y))
    x, y = d.masked_select(x, keep), d.masked_select(y, keep)
    if d.numel(x) < 2:
        return None
    x, order = d.sort(x)
    return x, d.take(y, order)


def _interpolated(d: Any, table: Any, q: Any) -> Any:
    """The piecewise-linear map through ``table`` at ``q`` (flat beyond its ends; exact at a point of it)."""
    xs, ys = table
    n = d.numel(xs)
    right = d.clamp(d.searchsorted(xs, q), 1, n - 1)
    left = d.sub(right, 1)
    x0, x1, y0, y1 = d.take(xs, left), d.take(xs, right), d.take(ys, left), d.take(ys, right)
    span = d.sub(x1, x0)
    flat = d.eq(span, 0)  # a point of the table (or beyond its ends): its value, no slope
    w = d.div(d.sub(q, x0), d.add(span, d.mul(flat, 1.0)))
    w = d.minimum(d.maximum(d.add(w, d.mul(flat, 1.0)), d.zeros_like(w)), d.ones_like(w))
    return d.add(y0, d.mul(w, d.sub(y1, y0)))


def _affine(d: Any, a: Any, b: Any, y: Any) -> Any:
    """The least-squares coefficients of y ≈ p·a + q·b + c, or None where they are not finite."""
    design = d.stack([a, b, d.ones_like(a)], 1)
    keep = d.logical_and(d.isfinite(y), d.isfinite(d.sum(design, 1)))
    rows = d.reshape(d.nonzero(keep), (-1,))
    if d.numel(rows) < 4:
        return None
    solution = d.lstsq(design[rows], d.reshape(y[rows], (-1, 1)))[0]
    return solution if d.all(d.isfinite(solution)) else None


def _held(d: Any, predicted: Any, y: Any, relative: float, tolerance: float) -> Any:
    """Where ``predicted`` is within ``relative`` of ``y``'s magnitude plus ``tolerance``."""
    allowed = d.add(d.mul(d.abs(y), relative), tolerance)
    return d.logical_and(d.isfinite(predicted), d.le(d.abs(d.sub(predicted, y)), allowed))


def fitted(d: Any, t: Any, changed: Any, operands: Any, generator: Any) -> Any:
    """Which of ``t``'s elements (flat, logical order) the best map of ``operands`` (their values before the launch)
    holds for, among ``changed`` (flat bool), with the share of the held-out sample it holds for and the map's
    description; None where nothing is judged (too few elements, no operand lines up, a complex dtype)."""
    if not d.is_floating(t):  # ids, counts, masks: a small value domain is matched by chance (not judged)
        return None
    where = d.reshape(d.nonzero(changed), (-1,))
    n = d.numel(where)
    if n < d.least:
        return None
    y_all = d.reshape(d.to(t, d.float64), (-1,))
    columns: list[Any] = []
    for r in d.sorted(operands, key=d.numel, reverse=True):
        if d.len(columns) == d.operands:
            break
        if not d.is_complex(r):
            column = _aligned(d, r, t)
            if column is not None:
                columns.append(column)
    if not columns:
        return None
    picked = d.take(where, d.to(d.randperm(n, generator=generator, device=generator.device), d.device_of(where)))
    half = d.min(d.samples, n // 2)
    fit, check = picked[:half], picked[half : 2 * half]
    y_fit, y_check = d.take(y_all, fit), d.take(y_all, check)
    finite = d.masked_select(y_check, d.isfinite(y_check))
    if not d.numel(finite):
        return None
    scale = d.float(d.amax(d.abs(finite)))
    eps = d.eps.get(d.dtype_of(t), d.eps[d.float32])
    relative, tolerance = d.max(d.ulps * eps, d.rtol_floor), d.abs_ulps * eps * scale
    best: Any = (-1.0, "", None)
    sampled = [d.take(c, picked[: 2 * half]) for c in columns]
    for key in _keys(d, d.len(columns)):
        values = _feature(d, sampled, key)
        table = _table(d, values[:half], y_fit)
        if table is None:
            continue
        held = _held(d, _interpolated(d, table, values[half:]), y_check, relative, tolerance)
        share = d.float(d.sum(held)) / half
        if share > best[0]:
            # the map every element is judged by: the sample's points that agree with the other half's map (an
            # honest element of the sample would otherwise match itself)
            other = _table(d, values[half:], y_check)
            if other is None:
                continue
            agree = _held(d, _interpolated(d, other, values[:half]), y_fit, relative, tolerance)
            both = d.cat([agree, held])
            consistent = _table(d, d.masked_select(values, both), d.masked_select(d.cat([y_fit, y_check]), both))
            best = (share, f"a map of {_named(key)}", (key, consistent))
    for i in d.range(d.len(columns)):
        for j in d.range(i + 1, d.len(columns)):
            a, b = d.take(columns[i], fit), d.take(columns[j], fit)
            solution = _affine(d, a, b, y_fit)
            if solution is None:
                continue
            p, q, c = d.float(solution[0, 0]), d.float(solution[1, 0]), d.float(solution[2, 0])
            predict = d.add(d.add(d.mul(d.take(columns[i], check), p), d.mul(d.take(columns[j], check), q)), c)
            share = d.float(d.sum(_held(d, predict, y_check, relative, tolerance))) / half
            if share > best[0]:
                best = (share, f"{p:.4g}·operand {i} + {q:.4g}·operand {j} + {c:.4g}", (i, j, p, q, c))
    share, what, how = best
    if share < d.share:
        return None, share, what
    if d.len(how) == 2:  # the univariate map, evaluated on every changed element
        if how[1] is None:
            return None, share, what
        whole = _feature(d, [d.take(c, where) for c in columns], how[0])
        predicted = _interpolated(d, how[1], whole)
    else:
        i, j, p, q, c = how
        predicted = d.add(d.add(d.mul(d.take(columns[i], where), p), d.mul(d.take(columns[j], where), q)), c)
    held = _held(d, predicted, d.take(y_all, where), relative, tolerance)
    mask = d.zeros((d.numel(y_all),), dtype=d.bool_, device=d.device_of(y_all))
    d.index_put_(mask, (where,), held)
    return mask, share, what


def explain(decoded: Any) -> str:
    """The sentence a coverage failure adds where the decode rule withdrew credit (``decoded``: the vault's
    records as the verifier lists them, [draw, launch, changed elements, share, map, withdrawn])."""
    withdrawn = [r for r in decoded if r[5]]
    if not withdrawn:
        return ""
    draw, launch, changed, share, what = withdrawn[0][:5]
    return (
        f" In correctness draw {draw}, DSL launch {launch} wrote {changed} elements {share:.0%} of which are {what} "
        "of its operands that eager code or the submission made (not problem inputs), within the verifier's "
        "allowance: the kernel decodes an answer computed outside the DSL, and those elements are not the DSL's."
    )
