"""The decode rule (DESIGN §5, verifier README "Decoded answers"): what a DSL launch adds to the data it reads.

An eager answer kept in an encoded form (×3, offset by a fixed random tensor, a table's entries, its bits XORed with
a key, its rows moved) and decoded by a kernel element by element leaves every output element written by the DSL,
while the DSL adds nothing the eager code had not computed. On a correctness draw, after each launch, the vault
(``_provenance``) asks here whether the elements the launch changed are recoverable, within the verifier's
allowance, from the launch's operands that are neither problem inputs (nor copies of them) nor the DSL's own data
(eager-made tensors, the submission's constants and tables, the launch's own buffers as they were before it) by a
simple map:

* any univariate map of one such operand (or of the sum, difference, product or ratio of two), learned by
  piecewise-linear interpolation on one random sample of the changed elements and judged on another (a global
  affine map, a monotone or any smooth unary function, a table lookup of a code);
* a global affine map of two operands, and one of all of them and their pairwise products (least squares on the
  first sample, judged on the second);
* on the bit patterns, where an operand's elements are as wide as the output's: the output's bits XOR an operand's,
  or minus it (modulo the width), constant, or its quotient by it, an odd constant (``_odd_key_of``); or XOR, sum or
  difference of two operands' bits (a key per element);
* any univariate map of an operand whose elements the launch moved: each sampled element's run of
  ``DECODE_WINDOW`` neighbours is looked up in the operand by its pattern of rises and falls (which any monotone
  map keeps), and the map is learned on the pairs found (a permutation of rows or blocks, with a scale).

Every map is scored against chance: the same map judged on the held-out sample with the operands of one element
paired with another's output (a mask's two values, a small integer domain, a run of zeros match that often), and
``(held - chance) / (1 - chance)`` is the score. So integer and boolean outputs are judged too, exactly.

Problem inputs are never regressors: an honest epilogue (eager GEMM, DSL scales by the problem's per-row and
per-column scales, adds its bias or residual) depends on them in a way the eager operands alone do not fix.
A key the kernel computes from each element's index is in no operand: ``_keyed`` compares draws instead.
Where the best map scores at least ``DECODE_SHARE``, the changed elements it holds for are not the DSL's (the vault
withdraws their credit, so derived credit does not flow from them either); the others keep theirs (a kernel
computing some elements honestly keeps those). One record per judged launch tells the verifier what was found.

Everything here runs inside the submission's worker: the functions use only the C functions bound in the
namespace ``bound()`` makes before the submission exists (no module global or builtin is looked up at run time).
Tensors are compared with tensors or integers, never a float scalar: inside an audited draw that imports a module,
which the guards refuse as a frame lookup of the verifier's.
"""

from __future__ import annotations

import math
import types
from typing import Any

import torch

#: A launch's changed elements are a decoded eager answer where the best map's score (its share of the held-out
#: sample beyond chance) reaches this: honest kernels reading eager data and problem inputs score a few percent.
DECODE_SHARE = 0.5
#: The map holds on an element within this many of the launch output's dtype epsilons of the element's own
#: magnitude (a decode is off by its output's rounding, half an epsilon, and its float32 arithmetic's) ...
DECODE_ULPS = 2.0
#: ... or this share of it, whichever is more: a smooth non-affine decode (an exp) learned by interpolation on a
#: sample is good to about this much, which float32 epsilons would refuse ...
DECODE_RTOL_FLOOR = 2.0**-10
#: ... plus this many epsilons of the map's own terms at the element (elements near zero, where they cancel): the
#: interpolation's two table values, an affine map's terms, a monomial's value. Not the sample's largest magnitude: a
#: heavy-tailed output (an exp's values over twenty decades), or a few huge elements written beside the answer, then
#: held nearly every element by chance, and the map's score (beyond chance) was the luck of the two or three left
#: (an eager answer's exp, mapped by an elementwise kernel, scored 0.4-1.0 by seed). The terms count for no more than
#: the sample's largest magnitude: an affine fit of large terms cancelling each other (a bit pattern read as a float
#: beside its operand) held an honest kernel's elements loosely enough to score 0.6 on one draw. Tighter than the
#: verifier's allowance (3 epsilons of the largest magnitude): at that width an honest bfloat16 epilogue scaling an
#: eager GEMM by the problem's scales was held on 60% of its elements (an answer hidden under noise as wide as the
#: allowance escapes: README "Known limits"). Integer and boolean outputs are held exactly.
DECODE_ABS_ULPS = 0.5
#: A best map scoring from this share up to ``DECODE_SHARE`` is peeled (``fitted``): the best map of the elements it
#: does not hold for is sought, up to ``DECODE_PEELS`` maps in all, and together they decide. Honest stages score at
#: most 0.26 (a clamped epilogue, the clamp deciding the output; README "Known limits") and their other elements, set
#: aside, at most a few percent: no second map, and one is no decode under half.
DECODE_PEEL = 0.15
DECODE_PEELS = 8
#: An evidence call's first launch whose maps scoring from ``DECODE_CONTRAST_FLOOR`` hold, together, at least this share
#: more of its changed elements than they held on any correctness draw's launch of its kind, at the same argument, is
#: withdrawn there (``_provenance.decode_later``): one code on data of one distribution is as decodable on every call,
#: and a kernel told by a switch to copy an eager part of the answer through a map on the timed calls alone was under
#: ``DECODE_PEEL`` at an eighth of the rows (red team rt48 F4: a full plan at 0.1%, 12.5% of the answer eager).
#: An honest launch's shares there and on the draws differ by the sampling's noise, which the bounds below take in.
DECODE_CONTRAST = 0.05
DECODE_CONTRAST_FLOOR = 0.05
#: ... the evidence call's share taken at its lower bound and the draws' at its upper, each map's score this many of
#: its standard errors apart (the held-out sample's binomial error): a launch of a few hundred elements, or an integer
#: output whose chance is high, scores within a few errors of chance, and the best of some fifty maps lies up to
#: three or four errors out; five keep an honest launch's chance maps off.
DECODE_CONTRAST_SIGMAS = 5.0
#: Elements in each of the two samples (fit, held out).
DECODE_SAMPLES = 2048
#: Fewer changed elements are not judged (a scalar, a row of statistics). A launch changing fewer in a tensor is pooled
#: with the call's other such launches into the same storage (``pooled``): the minimum is the pool's, not each
#: launch's (an answer decoded 63 elements per launch).
DECODE_MIN_ELEMENTS = 64
#: The operands tried as regressors, largest first.
DECODE_OPERANDS = 6
#: Consecutive elements whose order (rises and falls, the places of the largest and the smallest) locates a moved
#: element's run in an operand: 2^23 patterns; a block of at least twice this many elements moved whole is found at
#: every element.
DECODE_WINDOW = 16
#: Bit maps of the operands (bits XOR, plus or minus a constant or another operand's) kept as further columns, the
#: most plausible first (their values finite and near the output's magnitudes).
DECODE_BIT_COLUMNS = 4
#: Runs of the operand with the same pattern tried per element (the one an affine map fits best is taken).
DECODE_CANDIDATES = 8
#: The order-free fit (``_unordered``: an operand's values mapped and permuted) judges launches changing at most this
#: many elements (it sorts them and each operand of as many).
DECODE_UNORDERED_LIMIT = 1 << 22
#: ... comparing values at the output dtype's precision, a wider float's at this many bits of mantissa (2^-10, the
#: smooth maps' floor above) ...
DECODE_UNORDERED_BITS = 10
#: ... against chance: the same question asked of a neighbouring value, 1 to this many keys away (as the vault's
#: "copies in any order", ``_provenance.ELEMENT_STEPS``), no verdict where chance is above ``DECODE_UNORDERED_CHANCE``,
#: and a value more than one element in ``DECODE_UNORDERED_COMMON`` holds not judged ...
DECODE_UNORDERED_STEPS = 4
DECODE_UNORDERED_CHANCE = 0.75
DECODE_UNORDERED_COMMON = 256
#: ... and by at least this many.
DECODE_UNORDERED_FEW = 8
#: An operand of more than this many times the changed elements is not fitted order-free (its sort's cost); one of
#: up to this many is, less its commonest value's excess copies (an answer parked in a table of fill values).
DECODE_UNORDERED_TABLE = 4
#: A value's count is its count in the output within this fraction of its square root (``_as_often``).
DECODE_UNORDERED_SLACK = 4
#: Rank pairs the map is fitted on, where the sampled ones hold it (its precision at a bfloat16 output: most elements
#: keep their value; the cost of a launch of a million elements).
DECODE_UNORDERED_FIT = 1 << 16
#: An operand's runs indexed at most (up to 16.8M elements; one in 16 past that): a larger operand's runs are indexed at
#: every k-th start (k the least stride that keeps to this, at most 16, from a random phase) and each element is looked
#: up at up to 2k runs holding it instead of 2, so the index's cost (a sort) stays bounded while every element of a
#: block of at least 30 elements moved whole is still found, but those within k - 1 of its ends (a 16.8M-element eager
#: operand's index timed a production call out: rt8a, session 8).
DECODE_INDEX = 1 << 20
#: Changed elements at most whose moved source is looked up to withdraw them one by one (each costs 2k lookups);
#: where a moved map holds on more, a random sample of this many is checked and the rest are withdrawn with the map.
DECODE_MOVED_CHECKED = 1 << 14
#: Values of a run along an operand's last axis that place it in a problem input it is a slice of (``sliced_from``).
SLICE_RUN = 8
#: Problem inputs past this many elements are not searched for an operand's slice (``sliced_from``: one pass over the
#: input per axis of the operand; p22's qkv at PRODUCTION is 80.7M: red team rt50 F3).
SLICE_LARGEST = 1 << 28
#: Elements converted to float64 at a time where the rule reads a whole tensor (an output's or an operand's elements):
#: the fit's memory is its samples' and these parts', not eight bytes for every element of each tensor it reads (a
#: launch writing a 268M-element table on the H200 took the fit out of memory: p43 at PRODUCTION, session 18).
DECODE_PART = 1 << 20
#: Changed elements past which the samples are drawn without a permutation of all of them (eight bytes each).
DECODE_PERMUTED = 1 << 22


def bound() -> types.SimpleNamespace:
    """The C functions ``fitted`` calls, bound before the submission loads."""
    fns = torch._C._VariableFunctions
    base = torch._C.TensorBase
    return types.SimpleNamespace(
        len=len, range=range, min=min, max=max, int=int, float=float, tuple=tuple, list=list, sorted=sorted,
        str=str, enumerate=enumerate, bool=bool,
        to=base.to, reshape=base.reshape, numel=base.numel, size=base.size, dim=base.dim, take=base.take,
        abs=base.abs, amax=base.amax, sub=base.sub, add=base.add, mul=base.mul, div=base.div, le=base.le,
        gt=base.gt, ne=base.ne, logical_and=base.logical_and, logical_or=base.logical_or,
        logical_not=base.logical_not, isfinite=fns.isfinite, nonzero=base.nonzero, sum=base.sum, all=base.all,
        any=base.any, clamp=base.clamp, where=fns.where, searchsorted=fns.searchsorted, sort=base.sort,
        randperm=fns.randperm, stack=fns.stack, ones_like=fns.ones_like, zeros_like=fns.zeros_like, cat=fns.cat,
        eq=base.eq, minimum=fns.minimum, maximum=fns.maximum,
        transpose=base.transpose, masked_select=fns.masked_select, repeat=base.repeat, zip=zip, roll=fns.roll,
        view=base.view, as_strided=base.as_strided, storage_offset=base.storage_offset,
        element_size=base.element_size, bitwise_xor=base.bitwise_xor, bitwise_and=base.bitwise_and,
        mode=base.mode, arange=fns.arange, matmul=base.matmul, unfold=base.unfold, argmax=base.argmax,
        argmin=base.argmin, cumsum=base.cumsum, mean=base.mean, unsqueeze=base.unsqueeze,
        lstsq=torch.linalg.lstsq, log=base.log, exp=base.exp, lt=base.lt, ge=base.ge, flip=base.flip, round=round,
        rounded=base.round, randint=fns.randint, sqrt=base.sqrt, zeros=fns.zeros, index_put_=base.index_put_,
        is_floating=base.is_floating_point, is_complex=base.is_complex, dtype_of=base.__dict__["dtype"].__get__,
        device_of=base.__dict__["device"].__get__, float64=torch.float64, float32=torch.float32, bool_=torch.bool,
        int64=torch.int64, inf=float("inf"), nan=float("nan"),
        eps={dtype: torch.finfo(dtype).eps for dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16,
                                                         torch.float8_e4m3fn, torch.float8_e5m2)},
        ints={1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64},
        floats={1: torch.float8_e4m3fn, 2: torch.bfloat16, 4: torch.float32, 8: torch.float64},
        mantissa={dtype: round(-math.log2(torch.finfo(dtype).eps)) for dtype in (
            torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2)},
        share=DECODE_SHARE, peel=DECODE_PEEL, peels=DECODE_PEELS, contrast=DECODE_CONTRAST,
        contrast_floor=DECODE_CONTRAST_FLOOR, contrast_sigmas=DECODE_CONTRAST_SIGMAS, sqrt_of=math.sqrt,
        ulps=DECODE_ULPS, rtol_floor=DECODE_RTOL_FLOOR,
        abs_ulps=DECODE_ABS_ULPS,
        samples=DECODE_SAMPLES, least=DECODE_MIN_ELEMENTS, operands=DECODE_OPERANDS, window=DECODE_WINDOW,
        candidates=DECODE_CANDIDATES, bit_columns=DECODE_BIT_COLUMNS, settled=1e-9, index=DECODE_INDEX,
        moved_checked=DECODE_MOVED_CHECKED, part=DECODE_PART, permuted=DECODE_PERMUTED,
        unordered_limit=DECODE_UNORDERED_LIMIT, unordered_bits=DECODE_UNORDERED_BITS,
        unordered_steps=DECODE_UNORDERED_STEPS, unordered_common=DECODE_UNORDERED_COMMON,
        unordered_chance=DECODE_UNORDERED_CHANCE, unordered_table=DECODE_UNORDERED_TABLE,
        unordered_slack=DECODE_UNORDERED_SLACK, unordered_fit=DECODE_UNORDERED_FIT,
        unordered_few=DECODE_UNORDERED_FEW,
    )  # fmt: skip


def lined_up(d: Any, r: Any, t: Any) -> Any:
    """``r`` flat in ``t``'s logical order where it has ``t``'s elements (a matrix's transpose read back) or repeats
    to them (a tile: each trailing size dividing the target's, a broadcast among them), or None."""
    shape, target = d.tuple(d.size(r)), d.tuple(d.size(t))
    if d.numel(r) == d.numel(t):
        if d.dim(t) == 2 and d.len(shape) == 2 and shape == target[::-1] and shape[0] != shape[1]:
            r = d.transpose(r, 0, 1)
        return d.reshape(r, (-1,))
    if d.len(shape) > d.len(target) or d.numel(r) < 2 or d.numel(t) % d.numel(r):
        return None
    shape = (1,) * (d.len(target) - d.len(shape)) + shape
    for size, whole in d.zip(shape, target):
        if whole % size:
            return None
    # a tile repeated along every axis (an offset tile of 16 x 16 over the answer; a row or a column broadcast)
    return d.reshape(d.repeat(d.reshape(r, shape), [whole // size for size, whole in d.zip(shape, target)]), (-1,))


def sliced_from(d: Any, g: Any, u: Any) -> Any:
    """``g``'s elements (flat, in ``u``'s logical order) where ``u`` has fewer and holds a slice of them, or None: ``g``
    read from one offset with a stride per axis of ``u``, its last axis unit-strided (``qkv[:, a:b].contiguous()``, a
    head's columns, every other row), each axis's stride placed by where a run of ``SLICE_RUN`` of ``u``'s values along
    its last axis, from that axis's first step, lies in ``g`` (the run cast to ``g``'s dtype: ``g`` is never copied
    whole): one place each, else None (an input of repeated values places nothing)."""
    n, m, shape = d.numel(g), d.numel(u), d.tuple(d.size(u))
    if not shape or m < 2 or m >= n or n > SLICE_LARGEST or d.is_complex(g) or d.is_complex(u):
        return None
    source, flat = d.reshape(g, (-1,)), d.reshape(u, (-1,))
    bits = d.ints[d.element_size(g)]  # compared by bit pattern: fp8 has no eq on cpu
    values = d.view(source, bits)
    run = d.min(SLICE_RUN, shape[-1])
    device = d.device_of(g)

    def placed(start: int) -> Any:  # where u's run from its flat element ``start`` lies in g, or None: not one place
        # (taken through an integer view: fp8 has no take on cpu)
        taken = d.take(d.view(flat, d.ints[d.element_size(u)]), d.arange(start, start + run, device=device))
        wanted = d.view(d.to(d.view(taken, d.dtype_of(u)), d.dtype_of(g)), bits)
        places = d.reshape(d.nonzero(d.eq(values, d.take(wanted, d.zeros((1,), dtype=d.int64, device=device)))), (-1,))
        for i in d.range(1, run):
            places = d.masked_select(places, d.lt(places, n - i))
            at = d.take(wanted, d.add(d.zeros((1,), dtype=d.int64, device=device), i))
            places = d.masked_select(places, d.eq(d.take(values, d.add(places, i)), at))
        return d.int(d.take(places, d.zeros((), dtype=d.int64, device=device))) if d.numel(places) == 1 else None

    offset = placed(0)
    if offset is None:
        return None
    strides, step, reach = [1] * d.len(shape), 1, 0
    for axis in d.range(d.len(shape) - 1, -1, -1):
        if axis < d.len(shape) - 1 and shape[axis] > 1:
            at = placed(step)  # u's element one step along ``axis``, the others at zero
            if at is None or at <= offset:
                return None
            strides[axis] = at - offset
        reach += (shape[axis] - 1) * strides[axis]
        step *= shape[axis]
    if offset + reach >= n:
        return None
    return d.reshape(d.as_strided(source, shape, strides, d.storage_offset(source) + offset), (-1,))


def _aligned(d: Any, r: Any, t: Any) -> Any:
    """``r`` element by element with ``t``'s logical order as a column (``_column_at``: flat, its own dtype), or None:
    the same number of elements, the transpose of a matrix, or a tile repeated over it (a broadcast is one)."""
    flat = lined_up(d, r, t)
    return ("values", flat) if flat is not None else None


def _at(d: Any, flat: Any, positions: Any) -> Any:
    """``flat``'s elements at ``positions`` (any shape) as float64, taken by their bit patterns (fp8 and unsigned
    types have no take of their own on cuda)."""
    width = d.element_size(flat)
    return d.to(d.view(d.take(d.view(flat, d.ints[width]), positions), d.dtype_of(flat)), d.float64)


def _column_at(d: Any, column: Any, positions: Any) -> Any:
    """A column's values (float64) at ``positions``: an operand lined up with the output (("values", flat)) or a bit
    map of the operands (("bits", coded, spec)), computed where it is read, never for every element at once."""
    if column[0] == "bits":
        return _bit_values(d, column[1], column[2], positions)
    return _at(d, column[1], positions)


def _varies(d: Any, v: Any) -> bool:
    """Whether flat ``v`` holds a finite element other than its first (read ``DECODE_PART`` elements at a time)."""
    first = d.to(v[:1], d.float64)
    for start in d.range(0, d.numel(v), d.part):
        part = d.to(v[start : start + d.part], d.float64)
        if d.bool(d.any(d.logical_and(d.isfinite(part), d.ne(part, first)))):
            return True
    return False


def _ranks(d: Any, n: int, k: int, generator: Any, device: Any) -> Any:
    """Up to ``k`` distinct ranks below ``n`` in random order: a random permutation's first ``k``; past
    ``DECODE_PERMUTED``, ``2k`` draws with each drawn rank once (fewer than ``k`` distinct is as unlikely as ``k``
    collisions among ``2k`` draws), so that no permutation of all ``n`` is made."""
    if n <= d.permuted:
        drawn = d.randperm(n, generator=generator, device=generator.device)[:k]
    else:
        drawn = d.sort(d.randint(0, n, (2 * k,), generator=generator, device=generator.device))[0]
        drawn = d.masked_select(drawn, d.cat([d.ones_like(drawn[:1], dtype=d.bool_), d.ne(drawn[1:], drawn[:-1])]))
        drawn = d.take(drawn, d.randperm(d.numel(drawn), generator=generator, device=generator.device))[:k]
    return d.to(drawn, device)


def _coded(d: Any, r: Any, t: Any) -> Any:
    """``r``'s elements as bit patterns (integers of their width, flat, ``t``'s logical order: ``_unsigned`` reads
    them) with the type a kernel reading them would decode them as: a float of their width (``t``'s dtype where it
    is as wide), or their integers for an integer output; None where they do not line up with ``t`` element by
    element."""
    width = d.element_size(r)
    flat = lined_up(d, r, t)
    if flat is None or width not in d.ints:
        return None
    kind = d.ints[width]
    if d.is_floating(t):
        kind = d.dtype_of(t) if d.element_size(t) == width else d.floats.get(width, kind)
    return d.view(flat, d.ints[width]), width, kind


def _unsigned(d: Any, codes: Any, positions: Any, width: int) -> Any:
    """The bit patterns at ``positions`` as non-negative int64 (all 64 bits for 8-byte ones)."""
    taken = d.to(d.take(codes, positions), d.int64)
    return taken if width == 8 else d.bitwise_and(taken, (1 << (8 * width)) - 1)


def _decoded(d: Any, codes: Any, width: int, kind: Any) -> Any:
    """Bit patterns (int64) of ``width`` bytes as the values of type ``kind`` (float64)."""
    if width < 8:
        codes = d.bitwise_and(codes, (1 << (8 * width)) - 1)
    return d.to(d.view(d.to(codes, d.ints[width]), kind), d.float64)


def _in_kind(d: Any, y: Any, t: Any, width: int, kind: Any) -> Any:
    """The output's values (float64) as bit patterns of ``kind``, and the low bits the output's own type lacks."""
    codes = d.to(d.view(d.to(y, kind), d.ints[width]), d.int64)
    if width < 8:
        codes = d.bitwise_and(codes, (1 << (8 * width)) - 1)
    lacking = d.mantissa.get(kind, 0) - d.mantissa.get(d.dtype_of(t), 0) if d.is_floating(t) else 0
    return codes, d.max(lacking, 0)


def _bit_keys(d: Any, coded: Any, varied: Any) -> Any:
    """The bit maps: one operand's bits XOR or plus a constant; two operands' of one width XORed, summed or
    subtracted (neither constant: that is the first kind)."""
    found = [(i, None, how) for i in d.range(d.len(coded)) for how in ("^", "+", "^+", "+^", "*", "*+")]
    for i in d.range(d.len(coded)):
        for j in d.range(i + 1, d.len(coded)):
            if coded[i][1] == coded[j][1] and varied[i] and varied[j]:
                found += [(i, j, "^"), (i, j, "+"), (i, j, "-"), (j, i, "-")]
    return found


def _bits_named(key: Any) -> str:
    i, j, how = key
    if j is None:
        said = {"^": "XOR a constant", "+": "plus a constant", "^+": "XOR a constant, plus another",
                "+^": "plus a constant, XOR another", "*": "times an odd constant",
                "*+": "times an odd constant, plus another"}[how]  # fmt: skip
        return f"operand {i}'s bits {said}"
    return f"operand {i}'s bits " + {"^": "XOR", "+": "plus", "-": "minus"}[how] + f" operand {j}'s"


def _combined(d: Any, a: Any, b: Any, how: str) -> Any:
    if how == "^+":  # two constants (b): XOR, then add
        return d.add(d.bitwise_xor(a, b[0]), b[1])
    if how == "+^":
        return d.bitwise_xor(d.add(a, b[0]), b[1])
    if how == "*":  # modulo 2^64 (int64 products wrap), the width's low bits kept by the caller
        return d.mul(a, b)
    if how == "*+":
        return d.add(d.mul(a, b[0]), b[1])
    return d.bitwise_xor(a, b) if how == "^" else d.add(a, b) if how == "+" else d.sub(a, b)


def _chain_key_of(d: Any, codes: Any, width: int, kind: Any, target: Any, t: Any, how: str) -> Any:
    """The two constants of a chained bit map (``how``: "^+", XOR then add, or "+^") that turn ``codes`` into
    ``target``'s bits, found bit by bit from the lowest (a bit of the result depends on the constants' bits up to its
    own and on no higher one), keeping the pairs that agree with the most elements so far (a pair's two bits are told
    apart only by the carry they leave); with how many elements the best pair holds for. Only where the output keeps
    every bit of the operand's type (a rounded output hides the low bits the carries come from): else no key. The
    search stops once fewer than a tenth of the sample agree (no key: an honest operand's bits leave it after a few)."""
    mine, lacking = _in_kind(d, target, t, width, kind)
    none = ((0, 0), 0)
    if lacking:
        return none
    first = d.zeros((1,), dtype=d.int64, device=d.device_of(codes))
    second = d.zeros((1,), dtype=d.int64, device=d.device_of(codes))
    rows = d.unsqueeze(codes, 0)
    for k in d.range(8 * width):
        low = (1 << (k + 1)) - 1 if k < 63 else -1  # the bits 0..k (all of them at the 64th)
        bit = 1 << k if k < 63 else -(1 << 63)
        # every kept pair with this bit of each constant clear or set (a bit not yet set: adding it sets it)
        firsts = d.cat([first, d.add(first, bit), first, d.add(first, bit)])
        seconds = d.cat([second, second, d.add(second, bit), d.add(second, bit)])
        got = _combined(d, rows, (d.unsqueeze(firsts, 1), d.unsqueeze(seconds, 1)), how)
        counts = d.sum(d.eq(d.bitwise_and(got, low), d.bitwise_and(mine, low)), 1)
        top = d.amax(counts)
        if d.int(top) < d.numel(codes) // 10:
            return none
        best = d.eq(counts, top)
        first, second = d.masked_select(firsts, best)[: d.candidates], d.masked_select(seconds, best)[: d.candidates]
    return (d.int(first[0]), d.int(second[0])), d.int(top)


def inverse(d: Any, odd: Any) -> Any:
    """Each odd int64 element's inverse modulo 2^64 (Newton's iteration: x·(2 - a·x) doubles the bits that hold,
    three at the start since a·a = 1 modulo 8 for odd a; five steps reach 96)."""
    x = odd
    for _ in d.range(5):
        x = d.mul(x, d.add(d.mul(d.mul(odd, x), -1), 2))
    return x


def _odd_key_of(d: Any, codes: Any, width: int, kind: Any, target: Any, t: Any, how: str) -> Any:
    """The constants of a multiplicative bit map (``how``: "*", the pattern times an odd constant modulo 2^width, or
    "*+", then plus another) that turn ``codes`` into ``target``'s bits: the factor is the commonest y·e⁻¹ over the
    sample's odd patterns e ("*"), or (Δy)·(Δe)⁻¹ over pairs of neighbouring sample elements whose patterns differ by
    an odd amount ("*+", the offset cancels), the offset then the commonest y - e·k; with how many elements the map
    holds for. Only where the output keeps every bit of the operand's type (rt10's F1: an answer times an odd 64-bit
    key, the kernel multiplying by the inverse)."""
    mine, lacking = _in_kind(d, target, t, width, kind)
    low = (1 << (8 * width)) - 1 if width < 8 else -1
    none = ((0, 0) if how == "*+" else 0, 0)
    if lacking:
        return none
    a, b = (codes, mine) if how == "*" else (d.sub(codes, d.roll(codes, 1)), d.sub(mine, d.roll(mine, 1)))
    odd = d.eq(d.bitwise_and(a, 1), 1)
    if not d.bool(d.any(odd)):
        return none
    factor = d.mode(d.bitwise_and(d.mul(d.masked_select(b, odd), inverse(d, d.masked_select(a, odd))), low))[0]
    constant: Any = d.int(factor)
    if how == "*+":
        constant = (constant, d.int(d.mode(d.bitwise_and(d.sub(mine, d.mul(codes, factor)), low))[0]))
    held = d.eq(d.bitwise_and(_combined(d, codes, constant, how), low), mine)
    return constant, d.int(d.sum(held))


def _key_of(d: Any, codes: Any, width: int, kind: Any, target: Any, t: Any, how: str) -> Any:
    """The constant of a one-operand bit map that turns ``codes`` into ``target``'s values: the commonest gap between
    ``target``'s bits (in the operand's type) and the operand's, over the bits the output keeps (a narrower output
    rounds off the rest); with how many of the elements share it."""
    mine, lacking = _in_kind(d, target, t, width, kind)
    unit = 1 << lacking
    gap = d.div(d.bitwise_xor(mine, codes) if how == "^" else d.sub(mine, codes), unit, rounding_mode="floor")
    common = d.mode(gap)[0]
    return d.mul(common, unit), d.int(d.sum(d.eq(gap, common)))


def _bit_values(d: Any, coded: Any, spec: Any, positions: Any) -> Any:
    """The values a kernel decodes at ``positions`` by the bit map ``spec`` (i, j, how, constant)."""
    i, j, how, constant = spec
    codes, width, kind = coded[i]
    a = _unsigned(d, codes, positions, width)
    b = _unsigned(d, coded[j][0], positions, width) if j is not None else constant
    return _decoded(d, _combined(d, a, b, how), width, kind)


def _bit_columns(d: Any, coded: Any, t: Any, y_all: Any, fit: Any, columns: Any, scale: float) -> Any:
    """The bit maps of the operands most likely to be a decode, as further columns (name, values in ``t``'s order):
    those whose values are finite and within 2^24 of the output's largest magnitude on most of the sample, the most
    such first. A constant key is the one the sample agrees on best against the output, or against the output
    plus or minus an operand (an offset the kernel takes off after the bits)."""
    y = _at(d, y_all, fit)
    targets = [y]
    for c in columns:
        sampled = _column_at(d, c, fit)
        targets += [d.add(y, sampled), d.sub(y, sampled)]
    found = []
    varied = [d.bool(d.any(d.ne(d.take(c, fit), d.take(c, fit[:1])))) for c, _, _ in coded]  # (bit patterns)
    for key in _bit_keys(d, coded, varied):
        i, j, how = key
        if j is None:
            codes, width, kind = coded[i]
            codes = _unsigned(d, codes, fit, width)
            if how in ("^+", "+^"):  # two constants: searched against the output itself only (32 bit steps each)
                agreed = [_chain_key_of(d, codes, width, kind, y, t, how)]
            elif how in ("*", "*+"):  # an odd factor: against the output itself only
                agreed = [_odd_key_of(d, codes, width, kind, y, t, how)]
            else:
                agreed = [_key_of(d, codes, width, kind, target, t, how) for target in targets]
            constant, count = d.sorted(agreed, key=_second)[-1]
            if count < d.numel(fit) // 10:  # no key the sample agrees on
                continue
            spec = (i, None, how, constant)
        else:
            spec = (i, j, how, 0)
        values = d.abs(_bit_values(d, coded, spec, fit))
        plausible = d.logical_and(
            d.le(d.sub(values, scale * 2.0**24), 0),
            d.logical_or(d.eq(values, 0), d.gt(d.sub(values, scale * 2.0**-24), 0)),
        )
        share = d.float(d.mean(d.to(plausible, d.float64)))
        if share >= 0.5:
            found.append((share, _bits_named(key), spec))
    return [(name, ("bits", coded, spec)) for _, name, spec in d.sorted(found, key=_first)[::-1][: d.bit_columns]]


def _first(item: Any) -> Any:
    return item[0]


def _second(item: Any) -> Any:
    return item[1]


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


def _named(names: Any, key: Any) -> str:
    i, j, how = key
    return names[i] if j is None else f"({names[i]}) {how} ({names[j]})"


def _table(d: Any, x: Any, y: Any) -> Any:
    """The sample (x, y) as an interpolation table, finite points only, sorted by x."""
    keep = d.logical_and(d.isfinite(x), d.isfinite(y))
    x, y = d.masked_select(x, keep), d.masked_select(y, keep)
    if d.numel(x) < 2:
        return None
    x, order = d.sort(x)
    return x, d.take(y, order)


def _interpolated(d: Any, table: Any, q: Any) -> Any:
    """The piecewise-linear map through ``table`` at ``q`` (flat beyond its ends; exact at a point of it), and the
    magnitude of its terms there (the larger of the two table values: ``_held``)."""
    xs, ys = table
    n = d.numel(xs)
    right = d.clamp(d.searchsorted(xs, q), 1, n - 1)
    left = d.sub(right, 1)
    x0, x1, y0, y1 = d.take(xs, left), d.take(xs, right), d.take(ys, left), d.take(ys, right)
    span = d.sub(x1, x0)
    flat = d.eq(span, 0)  # a point of the table (or beyond its ends): its value, no slope
    w = d.div(d.sub(q, x0), d.add(span, d.mul(flat, 1.0)))
    w = d.minimum(d.maximum(d.add(w, d.mul(flat, 1.0)), d.zeros_like(w)), d.ones_like(w))
    return d.add(y0, d.mul(w, d.sub(y1, y0))), d.maximum(d.abs(y0), d.abs(y1))


def _rolled(d: Any, mapped: Any) -> Any:
    """``_interpolated`` at the same queries rolled by one, from its values there (each element's map is its own:
    the same numbers, without a second search of the table)."""
    return d.roll(mapped[0], 1), d.roll(mapped[1], 1)


def _affine(d: Any, design: Any, solution: Any) -> Any:
    """The affine map's values (``design`` · ``solution``) and the magnitude of its terms (``_held``)."""
    values = d.reshape(d.matmul(design, solution), (-1,))
    return values, d.reshape(d.matmul(d.abs(design), d.abs(solution)), (-1,))


def _solved(d: Any, design: Any, y: Any) -> Any:
    """The least-squares coefficients of y ≈ design · c (one column each), or None where they are not finite."""
    keep = d.logical_and(d.isfinite(y), d.isfinite(d.sum(design, 1)))
    rows = d.reshape(d.nonzero(keep), (-1,))
    if d.numel(rows) < 2 * d.size(design, 1):
        return None
    solution = d.lstsq(design[rows], d.reshape(y[rows], (-1, 1)))[0]
    return solution if d.all(d.isfinite(solution)) else None


def _design(d: Any, columns: Any, products: bool) -> Any:
    """The operands (and, with ``products``, each pair's product) and a constant, one column each."""
    parts = d.list(columns)
    if products:
        for i in d.range(d.len(columns)):
            for j in d.range(i + 1, d.len(columns)):
                parts.append(d.mul(columns[i], columns[j]))
    parts.append(d.ones_like(columns[0]))
    return d.stack(parts, 1)


def _held(d: Any, mapped: Any, y: Any, relative: float, absolute: Any) -> Any:
    """Where the map's values are within ``relative`` of ``y``'s magnitude plus a share of the magnitude of the map's
    terms at the element (``mapped``: the values and that magnitude, one each; ``absolute``: the share, and the most
    the magnitude counts for: the sample's largest, so that a fit of large terms cancelling each other is held no
    more loosely than the output's own scale allows)."""
    predicted, terms = mapped
    share, most = absolute
    allowed = d.add(d.mul(d.abs(y), relative), d.mul(d.clamp(terms, max=most), share))
    return d.logical_and(d.isfinite(predicted), d.le(d.abs(d.sub(predicted, y)), allowed))


def _score(d: Any, held: Any, by_chance: Any) -> tuple[float, float]:
    """The share ``held`` of the held-out sample beyond ``by_chance`` (the same map, operands and outputs of
    different elements paired), as a share of what chance leaves; and ``DECODE_CONTRAST_SIGMAS`` of its standard error
    (the sample's two shares' binomial errors)."""
    share, chance = d.float(d.mean(d.to(held, d.float64))), d.float(d.mean(d.to(by_chance, d.float64)))
    if chance >= 1.0:
        return 0.0, 1.0
    error = d.sqrt_of((share * (1.0 - share) + chance * (1.0 - chance)) / d.max(d.numel(held), 1)) / (1.0 - chance)
    return (share - chance) / (1.0 - chance), d.contrast_sigmas * error


def _windows(d: Any, v: Any, starts: Any) -> Any:
    """The runs of ``DECODE_WINDOW`` elements of flat ``v`` from ``starts`` (one row each, float64)."""
    return _at(d, v, d.add(d.unsqueeze(starts, 1), d.unsqueeze(d.arange(d.window, device=d.device_of(v)), 0)))


def _shapes(d: Any, rows: Any) -> Any:
    """Each run's order pattern, which any increasing map keeps: its rises (bit k: element k + 1 above element k),
    where its largest and its smallest element are; and whether the run is usable (no tie, no non-finite element,
    not monotone). The runs are ``rows`` (one each), or with a flat ``rows`` every run of it."""
    full = (1 << (d.window - 1)) - 1
    if d.dim(rows) == 1:  # every run of a flat tensor: contiguous shifted slices, ties by a running count
        count = d.numel(rows) - d.window + 1
        up = d.to(d.gt(rows[1:], rows[:-1]), d.int64)
        rises = d.mul(up[:count], 1)
        for k in d.range(1, d.window - 1):
            rises = d.add(rises, d.mul(up[k : k + count], 1 << k))
        tie = d.logical_not(d.logical_or(d.gt(rows[1:], rows[:-1]), d.gt(rows[:-1], rows[1:])))
        ties = d.cat([d.zeros((1,), dtype=d.int64, device=d.device_of(rows)), d.cumsum(tie, 0)])
        flat = d.gt(d.sub(ties[d.window - 1 :], ties[:count]), 0)
        runs = d.unfold(rows, 0, d.window, 1)
    else:
        up, down = d.gt(rows[:, 1:], rows[:, :-1]), d.gt(rows[:, :-1], rows[:, 1:])
        rises = d.mul(up[:, 0], 1)
        flat = d.logical_not(d.logical_or(up[:, 0], down[:, 0]))
        for k in d.range(1, d.window - 1):
            rises = d.add(rises, d.mul(up[:, k], 1 << k))
            flat = d.logical_or(flat, d.logical_not(d.logical_or(up[:, k], down[:, k])))
        runs = rows
    usable = d.logical_and(d.logical_not(flat), d.logical_and(d.ne(rises, 0), d.ne(rises, full)))
    return rises, d.argmax(runs, 1), d.argmin(runs, 1), usable


def _code(d: Any, rises: Any, top: Any, bottom: Any) -> Any:
    """One number for an order pattern (rises, the largest's and the smallest's places)."""
    bits = d.window - 1
    return d.add(rises, d.add(d.mul(top, 1 << bits), d.mul(bottom, 1 << (bits + 4))))


def _sources(d: Any, v: Any, index: Any, y_all: Any, positions: Any) -> Any:
    """For each of ``positions`` (of flat ``y_all``), the element of flat ``v`` it was moved from, or -1: the run
    around it (starting there, or ending there) looked up among ``v``'s runs of the same pattern of rises (or of
    falls: a decreasing map), the candidate an affine map of the run fits best. ``index``: ``v``'s runs' patterns,
    sorted, their starts and the stride k they were taken at (``_run_index``): the runs holding the element that start
    at it or at the k - 1 before it, and those that end at it or at the k - 1 after it, are looked up, so that one of
    them is indexed wherever they lie in a block moved whole (a run not holding the element could be another
    block's)."""
    codes, starts, stride = index
    n_y = d.numel(y_all)
    best_error = d.add(d.mul(d.to(positions, d.float64), 0.0), d.inf)
    best = d.sub(d.mul(positions, 0), 1)
    full = (1 << (d.window - 1)) - 1
    # the run starting at the element, the one ending there, then (with a stride) those shifted by up to k - 1
    backs = [0, d.window - 1]
    for j in d.range(1, stride):
        backs += [b for b in (j, d.window - 1 - j) if b not in backs]
    for back in backs:
        todo = d.reshape(d.nonzero(d.gt(d.sub(best_error, d.settled), 0)), (-1,))
        if not d.numel(todo):
            break
        first = d.clamp(d.sub(d.take(positions, todo), back), 0, n_y - d.window)
        ys = _windows(d, y_all, first)
        rises, top, bottom, usable = _shapes(d, ys)
        offset = d.sub(d.take(positions, todo), first)
        # an increasing map keeps the pattern; a decreasing one turns rises into falls and swaps the extremes
        for wanted in (_code(d, rises, top, bottom), _code(d, d.sub(d.mul(rises, -1), -full), bottom, top)):
            lo = d.searchsorted(codes, wanted)
            hi = d.searchsorted(codes, wanted, right=True)
            for k in d.range(d.candidates):
                # runs still open: a candidate left, and none found yet that an affine map fits to rounding
                open_ = d.logical_and(d.gt(d.sub(d.take(best_error, todo), d.settled), 0), d.gt(hi, d.add(lo, k)))
                rows = d.reshape(d.nonzero(d.logical_and(usable, open_)), (-1,))
                if not d.numel(rows):
                    break
                start = d.take(starts, d.add(d.take(lo, rows), k))
                vs, ys_k = _windows(d, v, start), ys[rows]
                # the run's affine fit: residual over the output run's own spread
                dv, dy = d.sub(vs, d.mean(vs, 1, True)), d.sub(ys_k, d.mean(ys_k, 1, True))
                slope = d.div(d.sum(d.mul(dv, dy), 1, True), d.add(d.sum(d.mul(dv, dv), 1, True), 1e-300))
                miss = d.sub(dy, d.mul(dv, slope))
                error = d.div(d.sum(d.mul(miss, miss), 1), d.add(d.sum(d.mul(dy, dy), 1), 1e-300))
                where = d.take(todo, rows)
                better = d.le(error, d.take(best_error, where))
                chosen = d.masked_select(where, better)
                d.index_put_(best_error, (chosen,), d.masked_select(error, better))
                moved_from = d.add(d.masked_select(start, better), d.masked_select(d.take(offset, rows), better))
                d.index_put_(best, (chosen,), moved_from)
    return best


def _run_index(d: Any, v: Any, generator: Any) -> Any:
    """``v``'s runs' order patterns, usable ones only, sorted, with their starts and the stride k they were taken at:
    every run (k = 1) where ``v`` has at most ``DECODE_INDEX``, else those starting at every k-th element from a
    random phase, k the least stride that keeps to it, at most ``DECODE_WINDOW`` (so that every run holding an element
    is looked up: past 16.8M elements, one in 16 is indexed)."""
    runs = d.numel(v) - d.window + 1
    stride = d.min((runs + d.index - 1) // d.index, d.window)
    if stride == 1:
        starts = d.arange(runs, device=d.device_of(v))
        rises, top, bottom, usable = _shapes(d, d.to(v, d.float64))
        code = d.masked_select(_code(d, rises, top, bottom), usable)
        starts = d.masked_select(starts, usable)
    else:
        phase = d.int(d.randint(0, stride, (1,), generator=generator, device=generator.device))
        starts = d.arange(phase, runs, stride, device=d.device_of(v))
        codes, kept = [], []
        for first in d.range(0, d.numel(starts), 1 << 16):  # in parts: each run's 16 values
            part = starts[first : first + (1 << 16)]
            rises, top, bottom, usable = _shapes(d, _windows(d, v, part))
            codes.append(d.masked_select(_code(d, rises, top, bottom), usable))
            kept.append(d.masked_select(part, usable))
        code, starts = d.cat(codes), d.cat(kept)
    code, order = d.sort(code)
    return code, d.take(starts, order), stride


def _moved(d: Any, v: Any, index: Any, y_all: Any, positions: Any) -> Any:
    """The values of flat ``v`` the elements at ``positions`` were moved from (NaN where none was found)."""
    source = _sources(d, v, index, y_all, positions)
    found = _at(d, v, d.clamp(source, 0, d.numel(v) - 1))
    return d.where(d.gt(source, -1), found, d.add(d.mul(found, 0.0), d.nan))


def regressor(d: Any, old: Any, eager: Any, generator: Any) -> Any:
    """An operand as the fit sees it: its eager-made elements (``eager``: per element, flat logical order; None where
    all are), the others NaN, which no map holds for; an integer (or boolean) operand's others random values of its
    type, which a map holds for by chance only, so that its bit patterns stay (as float64 with NaN, one element a DSL
    launch wrote took every bit map away: an odd factor or XOR key decoded beside it passed). None where no element is
    eager-made."""
    if eager is None:
        return old
    kept = d.reshape(eager, d.tuple(d.size(old)))
    if not d.bool(d.any(kept)):
        return None
    if d.bool(d.all(kept)):
        return old
    if d.is_floating(old) and d.element_size(old) > 1:
        return d.where(kept, old, d.nan)
    width = d.element_size(old)
    noise = d.randint(-(1 << 62), 1 << 62, d.tuple(d.size(old)), generator=generator, device=generator.device)
    if d.dtype_of(old) == d.bool_:
        noise = d.ne(d.bitwise_and(noise, 1), 0)
    else:
        noise = d.view(d.to(noise, d.ints[width]), d.dtype_of(old)) if width < 8 else d.view(noise, d.dtype_of(old))
    return d.where(kept, old, d.to(noise, d.device_of(old)))


def picked(d: Any, t: Any, where: Any, operands: Any) -> Any:
    """What the pool (``pooled``) keeps of a launch that changed ``t`` at flat ``where`` (logical order): those
    elements, and each operand's elements lined up with them (the operands as ``fitted`` would take them, in order,
    their own dtype; tiles and broadcasts too; the others left out), or None where none lines up."""
    chosen = [r for r in d.sorted(operands, key=d.numel, reverse=True) if not d.is_complex(r)][: d.operands]
    columns = []
    for r in chosen:
        flat = lined_up(d, r, t)
        if flat is not None:
            columns.append(d.take(flat, where))
    return (d.take(d.reshape(t, (-1,)), where), columns) if columns else None


def pooled(d: Any, pool: Any, generator: Any) -> Any:
    """``fitted`` over a pool of launches' ``picked`` (each: its output elements, its operands' columns), as one
    launch of their elements: per launch, which of its picked elements the map holds for (or None for none), with the
    score and the map; None where the pool is not judged."""
    y = d.cat([entry[0] for entry in pool])
    columns = [d.cat([entry[1][k] for entry in pool]) for k in d.range(d.len(pool[0][1]))]
    found = fitted(d, y, d.ones_like(y, dtype=d.bool_), columns, generator)
    if found is None:
        return None
    mask, score, what = found[:3]
    parts, start = [], 0
    for entry in pool:
        count = d.numel(entry[0])
        parts.append(mask[start : start + count] if mask is not None else None)
        start += count
    return parts, score, what


def fitted(d: Any, t: Any, changed: Any, operands: Any, generator: Any) -> Any:
    """Which of ``t``'s elements (flat, logical order) the best map of ``operands`` (their values before the launch)
    holds for, among ``changed`` (flat bool), with its score (the share of the held-out sample beyond chance), the
    map's description, and what the maps scoring from ``DECODE_CONTRAST_FLOOR`` hold (``peeled``: their elements,
    None where the first map's lower bound is under that floor, then bounds on their share of the changed ones
    beyond chance, lower and upper, ``DECODE_CONTRAST_SIGMAS`` of each score's error apart; None for no map); None
    where nothing is judged (too few elements, no operand lines up, a complex dtype).

    A map scoring from ``DECODE_PEEL`` to ``DECODE_SHARE`` is peeled: its elements are set aside and the best map of
    the rest is sought, ``DECODE_PEELS`` times at most; where the maps together hold ``DECODE_SHARE`` of the changed
    elements, they hold for all of those (red team rt46 F1: an eager answer stored ×3, ×5 and ×7 by column and
    decoded by the kernel, each map under half of the elements, was the DSL's work whole). Peeling goes on past the
    first map under ``DECODE_PEEL`` down to ``DECODE_CONTRAST_FLOOR`` for ``peeled`` alone, which decides nothing here:
    the vault compares an evidence call's with the correctness draws' (``DECODE_CONTRAST``)."""
    found = _fitted_once(d, t, changed, operands, generator, d.contrast_floor)
    if found is None:
        return None
    if found[0] is None or found[1] >= d.share:
        return found[0], found[1], found[2], None
    union, score, what, margin = found
    total = d.int(d.sum(changed))
    decided = score >= d.peel  # the maps a decode is made of: those before the first scoring under ``DECODE_PEEL``
    # the maps ``peeled`` holds: those before the first whose lower bound is under ``DECODE_CONTRAST_FLOOR`` (the
    # elements a map leaves are not a random sample: where a map of a few integers held by chance, the rest hold its
    # other values more often than chance, and a peel from a chance map found ever stronger ones, over 90% of an
    # honest output of ids)
    measured = score - margin >= d.contrast_floor
    names, remaining, strong = [what], d.logical_and(changed, d.logical_not(union)), union
    held, low, high = union if measured else None, score - margin if measured else 0.0, score + margin
    for _ in d.range(d.peels - 1):
        left = d.int(d.sum(remaining))
        if left < d.least or not (decided or measured):
            break
        more = _fitted_once(d, t, remaining, operands, generator, d.contrast_floor)
        if more is None or more[0] is None:
            break
        remaining = d.logical_and(remaining, d.logical_not(more[0]))
        decided = decided and more[1] >= d.peel
        if decided:
            strong = d.logical_or(strong, more[0])
            names.append(more[2])
        measured = measured and more[1] - more[3] >= d.contrast_floor
        if measured:
            held = d.logical_or(held, more[0])
            low += (more[1] - more[3]) * left / total
        high += (more[1] + more[3]) * left / total
    peeled = (held, low, d.min(high, 1.0))
    together = d.int(d.sum(strong)) / total if score >= d.peel else 0.0
    if d.len(names) < 2 or together < d.share:
        return None, score, what, peeled
    named = [n for k, n in d.enumerate(names) if n not in names[:k]]  # each map's kind once, with its count
    said = " and ".join(f"{n} (x{d.len([m for m in names if m == n])})" for n in named)
    return strong, together, f"{said}: together {d.round(100 * together)}% of the changed elements", peeled


def _fitted_once(d: Any, t: Any, changed: Any, operands: Any, generator: Any, least_score: float) -> Any:
    """``fitted``'s best map, with the elements it holds for where it scores at least ``least_score``."""
    if d.is_complex(t):
        return None
    where = d.reshape(d.nonzero(changed), (-1,))
    n = d.numel(where)
    if n < d.least:
        return None
    y_all = d.reshape(t, (-1,))  # its own dtype: each part read is taken as float64 (``_at``)
    chosen = [r for r in d.sorted(operands, key=d.numel, reverse=True) if not d.is_complex(r)][: d.operands]
    columns, names = [], []
    for i, r in d.enumerate(chosen):
        column = _aligned(d, r, t)
        if column is not None:
            columns.append(column)
            names.append(f"operand {i}")
    coded = [c for c in (_coded(d, r, t) for r in chosen) if c is not None]
    # an operand the changed elements could have been moved from: at least half as many elements, not constant
    flats = [d.reshape(r, (-1,)) for r in chosen if d.numel(r) >= d.max(d.window, n // 2)]
    flats = [v for v in flats if _varies(d, v)]
    floating = d.is_floating(t)
    if not columns and not coded and not (floating and flats) and not [r for r in chosen if d.numel(r) >= n]:
        return None
    picked = d.take(where, _ranks(d, n, 2 * d.samples, generator, d.device_of(where)))
    half = d.min(d.samples, d.numel(picked) // 2)
    picked = picked[: 2 * half]
    fit, check = picked[:half], picked[half:]
    y_fit, y_check = _at(d, y_all, fit), _at(d, y_all, check)
    finite = d.masked_select(y_check, d.isfinite(y_check))
    if not d.numel(finite):
        return None
    scale = d.float(d.amax(d.abs(finite)))
    if floating:
        eps = d.eps.get(d.dtype_of(t), d.eps[d.float32])
        relative, tolerance = d.max(d.ulps * eps, d.rtol_floor), (d.abs_ulps * eps, scale)
    else:  # ids, counts, masks: exactly
        relative, tolerance = 0.0, (0.0, 0.0)
    for name, column in _bit_columns(d, coded, t, y_all, fit, columns, scale):
        columns.append(column)
        names.append(name)
    best: Any = (-1.0, "", None, 0.0)

    def univariate(values: Any, name: str, how: Any) -> None:
        """The interpolated map of one feature (both samples' values, fit half first)."""
        nonlocal best
        table = _table(d, values[:half], y_fit)
        if table is None:
            return
        checked = values[half:]
        mapped = _interpolated(d, table, checked)
        held = _held(d, mapped, y_check, relative, tolerance)
        score, margin = _score(d, held, _held(d, _rolled(d, mapped), y_check, relative, tolerance))
        if score > best[0]:
            # the map every element is judged by: the sample's points that agree with the other half's map (an
            # honest element of the sample would otherwise match itself)
            other = _table(d, checked, y_check)
            if other is None:
                return
            agree = _held(d, _interpolated(d, other, values[:half]), y_fit, relative, tolerance)
            both = d.cat([agree, held])
            consistent = _table(d, d.masked_select(values, both), d.masked_select(d.cat([y_fit, y_check]), both))
            if consistent is not None:
                best = (score, name, (how, consistent), margin)

    sampled = [_column_at(d, c, picked) for c in columns]
    for key in _keys(d, d.len(columns)):
        univariate(_feature(d, sampled, key), f"a map of {_named(names, key)}", ("map", key))
    # affine maps: each pair of operands, then all of them with their pairwise products (three or more operands)
    sets = [((i, j), False) for i in d.range(d.len(columns)) for j in d.range(i + 1, d.len(columns))]
    # (finite and not constant: a constant column is the intercept again, which cuda's least squares cannot take)
    usable = [
        i for i in d.range(d.len(columns)) if d.all(d.isfinite(sampled[i])) and d.any(d.ne(sampled[i], sampled[i][:1]))
    ]
    if d.len(usable) >= 2:
        sets.append((d.tuple(usable), True))
    for kept, products in sets:
        design = _design(d, [sampled[i] for i in kept], products)
        solution = _solved(d, design[:half], y_fit)
        if solution is None:
            continue
        predicted = _affine(d, design[half:], solution)
        rolled = _affine(d, d.roll(design[half:], 1, 0), solution)
        score, margin = _score(
            d, _held(d, predicted, y_check, relative, tolerance), _held(d, rolled, y_check, relative, tolerance)
        )
        if score > best[0]:
            name = "an affine map of " + ", ".join(names[i] for i in kept) + (" and their products" if products else "")
            best = (score, name, ("affine", kept, products, solution), margin)
    if d.len(usable) >= 2:  # a monomial of them, any degree (E·R1·R2, E/(R1·R2), E²·R): affine in log space
        sampled_usable = [sampled[i] for i in usable]
        monomial = _monomial_fitted(d, [c[:half] for c in sampled_usable], y_fit)
        if monomial is not None:
            checked = [c[half:] for c in sampled_usable]
            held = _held(d, _monomial(d, checked, monomial), y_check, relative, tolerance)
            rolled = _monomial(d, [d.roll(c, 1) for c in checked], monomial)
            score, margin = _score(d, held, _held(d, rolled, y_check, relative, tolerance))
            if score > best[0]:
                best = (score, "a monomial of " + ", ".join(names[i] for i in usable), ("monomial", usable, monomial),
                        margin)  # fmt: skip
    # moved elements: an operand's runs found again elsewhere in the output (floating outputs: integer ones tie)
    if floating and best[0] < d.share:  # (a map in place already decides)
        for i, v in d.enumerate(flats):
            index = _run_index(d, v, generator)
            if d.numel(index[0]) == 0:
                continue
            univariate(
                _moved(d, v, index, y_all, picked),
                f"a map of operand {i}'s elements moved",
                ("moved", i, index),
            )
    unordered = None
    if best[0] < d.share and n <= d.unordered_limit:  # a permuted operand: the values in any order (``_unordered``)
        unordered = _unordered(d, _at(d, y_all, where), chosen, t, generator, (relative, tolerance))
        if unordered is not None and unordered[0] > best[0]:
            best = (*unordered, 0.0)
    score, what, how, margin = best
    if score < least_score or how is None:  # (an order-free fit holds for elements only from ``DECODE_SHARE``)
        return None, score, what, margin
    mask = d.zeros((d.numel(y_all),), dtype=d.bool_, device=d.device_of(y_all))
    held = (
        how
        if unordered is not None and how is unordered[2]
        else _holds(d, how, where, (columns, flats, y_all), relative, tolerance, generator)
    )
    d.index_put_(mask, (where,), held)
    return mask, score, what, margin


def _values(d: Any, spec: Any, positions: Any, data: Any) -> Any:
    """The feature ``spec`` at ``positions``: a map's column or pair of columns ("map", key), or the operand elements
    found moved there ("moved", i, index); ``data``: (columns, flat operands, the output flat)."""
    columns, flats, y_all = data
    if spec[0] == "map":
        return _feature(d, [_column_at(d, c, positions) for c in columns], spec[1])
    return _moved(d, flats[spec[1]], spec[2], y_all, positions)


def _predicted(d: Any, how: Any, positions: Any, data: Any) -> Any:
    """The chosen map's values at ``positions`` (an affine map, a monomial, or a table of one feature), with the
    magnitude of its terms (``_held``)."""
    columns = data[0]
    if how[0] == "affine":
        _, kept, products, solution = how
        return _affine(d, _design(d, [_column_at(d, columns[i], positions) for i in kept], products), solution)
    if how[0] == "monomial":
        return _monomial(d, [_column_at(d, columns[i], positions) for i in how[1]], how[2])
    spec, table = how
    return _interpolated(d, table, _values(d, spec, positions, data))


def _holds(d: Any, how: Any, where: Any, data: Any, relative: float, tolerance: Any, generator: Any) -> Any:
    """Which of the changed elements (``where``) the chosen map holds for, judged ``DECODE_PART`` at a time. A moved
    map is checked on at most ``DECODE_MOVED_CHECKED`` of them (a random sample; each element's source costs 2k
    lookups), in parts of 2^16 (a moved element's runs are 16 × 8 values), the others taken as held: the map already
    holds on most of the launch's elements."""
    moved = how[0] not in ("affine", "monomial") and how[0][0] == "moved"
    checked, chosen = where, None
    if moved and d.numel(where) > d.moved_checked:
        chosen = _ranks(d, d.numel(where), d.moved_checked, generator, d.device_of(where))
        checked = d.take(where, chosen)
    step = 1 << 16 if moved else d.part
    held = []
    for start in d.range(0, d.numel(checked), step):
        part = checked[start : start + step]
        held.append(_held(d, _predicted(d, how, part, data), _at(d, data[2], part), relative, tolerance))
    if chosen is None:
        return d.cat(held)
    every = d.ones_like(where, dtype=d.bool_)
    d.index_put_(every, (chosen,), d.cat(held))
    return every


def _monomial(d: Any, columns: Any, how: Any) -> Any:
    """The monomial ``how`` (exponents and constant, the operands whose signs it takes, an overall sign) of
    ``columns``: sign · exp(c0 + Σ c_k·log|x_k|) (a zero operand gives 0 or inf), and its magnitude (``_held``: a
    product's terms are its value)."""
    solution, odd, sign = how
    magnitude = d.exp(d.reshape(d.matmul(_log_design(d, columns), solution), (-1,)))
    for c, flips in d.zip(columns, odd):
        if flips:
            magnitude = d.where(d.lt(c, 0), d.mul(magnitude, -1.0), magnitude)
    values = d.mul(magnitude, sign)
    return values, d.abs(values)


def _log_design(d: Any, columns: Any) -> Any:
    """The operands' logs of magnitudes and a constant, one column each."""
    return d.stack([*(d.log(d.abs(c)) for c in columns), d.ones_like(columns[0])], 1)


def _monomial_fitted(d: Any, columns: Any, y: Any) -> Any:
    """A monomial of ``columns`` fitted to ``y`` (least squares in log space, zeros and non-finite elements left
    out; its sign from the operands whose signs the sample follows, and overall the majority's), or None."""
    solution = _solved(d, _log_design(d, columns), d.log(d.abs(y)))
    if solution is None:
        return None
    # each operand's sign flips the output's where that agrees with more of the sample (odd exponents, sign-keeping
    # roots alike), then the overall sign
    odd = [False] * d.len(columns)
    agree = d.float(d.mean(d.to(d.gt(d.mul(_monomial(d, columns, (solution, odd, 1.0))[0], y), 0), d.float64)))
    for k in d.range(d.len(columns)):
        tried = [*odd[:k], True, *odd[k + 1 :]]
        agrees = d.float(d.mean(d.to(d.gt(d.mul(_monomial(d, columns, (solution, tried, 1.0))[0], y), 0), d.float64)))
        if agrees > agree:
            odd, agree = tried, agrees
    return solution, odd, 1.0 if agree >= 0.5 else -1.0


def _ordered_keys(d: Any, values: Any, t: Any) -> Any:
    """Integer keys of finite ``values`` (float64) at ``t``'s precision, in the values' order: a float output's
    rounding to its dtype (its bit patterns as sign and magnitude, neighbouring keys neighbouring values; a wide float
    to ``DECODE_UNORDERED_BITS`` bits of mantissa), an integer output's nearest integer."""
    if not d.is_floating(t):
        return d.to(d.rounded(values), d.int64)
    width = d.element_size(t)
    bits = d.to(d.view(d.to(values, d.dtype_of(t)), d.ints[width]), d.int64)
    magnitude = d.bitwise_and(bits, (1 << (8 * width - 1)) - 1)
    coarse = d.div(magnitude, 1 << d.max(d.mantissa.get(d.dtype_of(t), 0) - d.unordered_bits, 0), rounding_mode="floor")
    return d.where(d.ne(bits, magnitude), d.mul(coarse, -1), coarse)


def _counts(d: Any, keys: Any, probes: Any) -> Any:
    """How many of sorted ``keys`` equal each of ``probes``."""
    return d.sub(d.searchsorted(keys, probes, right=True), d.searchsorted(keys, probes))


def _without_fill(d: Any, v: Any, excess: int) -> Any:
    """Sorted ``v`` less ``excess`` copies of its commonest value (a table's fill around a parked answer), or None
    where that value has fewer."""
    fill = d.mode(v)[0]
    start = d.int(d.searchsorted(v, fill))
    if d.int(d.searchsorted(v, fill, right=True)) - start < excess:
        return None
    return d.cat([v[:start], v[start + excess :]])


def _quantile_maps(d: Any, a: Any, b: Any) -> Any:
    """The maps a decode applies to one value tried on rank pairs (``a`` the operand's sorted values, ``b`` the
    output's, either direction): affine, an exponential (b of one sign) and a power (a and b each of one sign), as
    (name, the design of a, the target, back from the target to values)."""
    found: list[tuple[str, Any, Any, Any]] = [("an affine map", a, b, None)]
    one_sign = d.bool(d.gt(b[0], 0)) or d.bool(d.lt(b[-1], 0))
    if one_sign:
        sign = 1.0 if d.bool(d.gt(b[0], 0)) else -1.0
        target = d.log(d.abs(b))
        found.append(("an exponential", a, target, sign))
        if d.bool(d.gt(a[0], 0)) or d.bool(d.lt(a[-1], 0)):
            found.append(("a power", d.log(d.abs(a)), target, sign))
    return found


def _line(d: Any, x: Any, target: Any, sign: Any, at: Any) -> Any:
    """The least-squares line through (``x``, ``target``), at ``at`` and back to values (``sign``: the target is the
    log of the values' magnitudes, of that sign), or None. Values (no ``sign``) are fitted again by their relative
    error, weighted by the first line's magnitude (a float output's rounding is relative: near zero it is fine).
    With the values, the magnitude of the map's terms (``_held``)."""
    keep = d.to(d.logical_and(d.isfinite(x), d.isfinite(target)), d.float64)
    line = _weighted_line(d, x, target, keep)
    if line is None:
        return None
    if sign is None:
        magnitude = d.abs(d.add(d.mul(x, line[0]), line[1]))
        weight = d.div(keep, d.add(magnitude, d.float(d.amax(magnitude)) * 2.0**-24 + 1e-300))
        line = _weighted_line(d, x, target, d.mul(weight, weight))
        if line is None:
            return None
    mapped = d.add(d.mul(at, line[0]), line[1])
    if sign is None:
        return mapped, d.add(d.abs(d.mul(at, line[0])), d.max(line[1], -line[1]))
    values = d.mul(d.exp(mapped), sign)
    return values, d.abs(values)


def _weighted_line(d: Any, x: Any, y: Any, weight: Any) -> Any:
    """The slope and intercept minimising the ``weight``-ed squared misses of ``y`` by ``x`` (weight 0: left out);
    None where ``x`` is constant."""
    total = d.float(d.sum(weight))
    if not total > 0:
        return None
    used = d.gt(weight, 0)
    x0, y0 = d.where(used, x, d.zeros_like(x)), d.where(used, y, d.zeros_like(y))
    mx, my = d.float(d.sum(d.mul(weight, x0))) / total, d.float(d.sum(d.mul(weight, y0))) / total
    dx = d.sub(x0, mx)
    spread = d.float(d.sum(d.mul(weight, d.mul(dx, dx))))
    if not spread > 0:
        return None
    slope = d.float(d.sum(d.mul(weight, d.mul(dx, d.sub(y0, my))))) / spread
    return slope, my - slope * mx


def _unordered(d: Any, y: Any, operands: Any, t: Any, generator: Any, tolerances: Any) -> Any:
    """The order-free fit: an eager operand whose values, less the fill of a table, are as many as the changed
    elements ``y`` (float64, flat; at most ``DECODE_UNORDERED_LIMIT``) and which a monotone map (affine,
    exponential, power) sends onto them in sorted order (rank by rank, fitted on a sample of ranks) holds their
    values with their multiplicity, at the output's precision (``_ordered_keys``), beyond chance (the same question
    asked of a neighbouring key, as the vault's copies in any order): a permutation of a decoded answer. Returns
    (score, the map's name, per element of ``y`` whether the mapped operand holds its value as often as ``y`` does:
    None under ``DECODE_SHARE``), or None where nothing is judged."""
    n = d.numel(y)
    if d.dtype_of(t) == d.bool_ or not d.bool(d.all(d.isfinite(y))):
        return None
    ys = d.sort(y)[0]
    keys = _ordered_keys(d, ys, t)  # sorted, as the values are
    device = d.device_of(y)
    count = d.min(d.samples, n)
    # one random order: its first elements are the probed values, and (as ranks) the rank pairs the map is fitted on
    many = d.to(d.randperm(n, generator=generator, device=generator.device), device)[: d.unordered_fit]
    probes = _ordered_keys(d, d.take(y, many[:count]), t)
    steps = d.randint(1, d.unordered_steps + 1, (count,), generator=generator, device=generator.device)
    signs = d.sub(d.mul(d.randint(0, 2, (count,), generator=generator, device=generator.device), 2), 1)
    neighbours = d.add(probes, d.to(d.mul(steps, signs), device))
    need = _counts(d, keys, probes)
    # a value many output elements hold (a relu's zeros, a small integer domain) says nothing; a few copies of one
    # (scales of rounded maxima) do
    judged = d.logical_not(d.logical_and(d.ge(d.mul(need, d.unordered_common), n + 1), d.ge(need, d.unordered_few)))
    weight = d.float(d.sum(judged))
    if weight < count // 8:
        return None
    ranks = many[:count]
    best: Any = (-1.0, "", None)
    for i, r in d.enumerate(operands):
        if d.numel(r) < n or d.numel(r) > d.unordered_table * n:
            continue
        v = d.reshape(d.to(r, d.float64), (-1,))
        v = d.sort(d.masked_select(v, d.isfinite(v)))[0]
        if d.numel(v) > n:
            v = _without_fill(d, v, d.numel(v) - n)
        if v is None or d.numel(v) != n:
            continue
        for direction, a in (("", v), (", decreasing", d.flip(v, (0,)))):
            for name, x, target, sign in _quantile_maps(d, a, ys):
                # the sampled rank pairs first (cheap): a map that misses most of them holds no permutation
                mapped = _line(d, x[ranks], target[ranks], sign, x[ranks])
                if mapped is None or d.float(d.mean(d.to(_held(d, mapped, ys[ranks], *tolerances), d.float64))) < (
                    d.share
                ):
                    continue
                # then more ranks: the map as exact as the output's rounding lets it be (a value's neighbours are close)
                mapped = _line(d, x[many], target[many], sign, x)
                if mapped is None:
                    continue
                values = mapped[0]
                # the keys of a monotone map of sorted values are sorted (ascending, or descending: reversed)
                theirs = _ordered_keys(d, d.masked_select(values, d.isfinite(values)), t)
                if d.numel(theirs) and d.bool(d.gt(theirs[0], theirs[-1])):
                    theirs = d.flip(theirs, (0,))
                share = d.float(d.sum(d.logical_and(_as_often(d, _counts(d, theirs, probes), need), judged))) / weight
                chance = d.float(d.sum(d.logical_and(_as_often(d, _counts(d, theirs, neighbours), need), judged)))
                chance /= weight
                if chance > d.unordered_chance:
                    continue  # keys this dense hold anything: no verdict
                score = (share - chance) / (1.0 - chance)
                if score > best[0]:
                    best = (score, f"{name}{direction} of operand {i}'s values in any order", theirs)
    if best[2] is None:
        return None
    score, name, theirs = best
    if score < d.share:  # (each element's count: only where the rule withdraws them)
        return score, name, None
    mine = _ordered_keys(d, y, t)
    return score, name, _as_often(d, _counts(d, theirs, mine), _counts(d, keys, mine))


def _as_often(d: Any, held: Any, need: Any) -> Any:
    """Whether a value's count among the mapped operand's (``held``) is its count among the output's (``need``), up
    to a ``DECODE_UNORDERED_SLACK``-th of the count's square root: a dense output's values (many elements a key) keep
    their counts but for the few a map fitted to rounded values puts a key away, while a count drawn independently is
    off by about its square root."""
    slack = d.div(d.sqrt(d.to(need, d.float64)), d.unordered_slack, rounding_mode="floor")
    return d.le(d.abs(d.sub(held, need)), slack)


def explain(decoded: Any) -> str:
    """The sentence a coverage failure adds where the decode rule withdrew credit (``decoded``: the vault's
    records as the verifier lists them, [draw, launch, changed elements, score, map, withdrawn])."""
    withdrawn = [r for r in decoded if r[5]]
    if not withdrawn:
        return ""
    draw, launch, changed, share, what = withdrawn[0][:5]
    return (
        f" In correctness draw {draw}, DSL launch {launch} wrote {changed} elements, {share:.0%} of them (beyond "
        f"chance) are {what} "
        "of its operands that eager code or the submission made (not problem inputs), within the verifier's "
        "allowance: the kernel decodes an answer computed outside the DSL, and those elements are not the DSL's."
    )
