"""The bypass test measured as coverage (DESIGN §5): how much of each output the DSL kernels produce.

Two kinds of evidence, both about the *input-dependent* elements of an output (those whose anchor
changes from one draw to another; for an in-place input, those the operator changes), since constants
and padding say nothing about who computed them:

* suppression: in one correctness draw, chosen at random after the first, the effect of every DSL
  launch is undone (``_provenance``) and fresh allocations hold a sentinel (NaN; zero for integers,
  which later kernels may follow as counts or offsets). The share of an output's elements that are
  then wrong is the share that depends on the kernels;
* provenance: in the other correctness draws the worker's vault samples every tensor of an output's
  size that no DSL launch wrote nor derived from (eager results and inputs, launch arguments before the
  launch, returned outputs not written by a launch). Where such a tensor already matches an output's
  anchor, those values existed without the DSL: a kernel that copies or merely gates an eager answer
  does not produce them, however the submission behaves when its launches are suppressed. The same
  vault also checks layouts it cannot line up: when a floating tensor that eager code made during the
  call (not an input) and passed to a DSL launch holds at least 95% of a returned output's elements by
  value, counted with their multiplicity (``COPY_SHARE``: padded, transposed, strided or gathered, the
  values are the same), the output's positions whose values it holds existed without the DSL; and, pooled over
  every such argument of every launch of the call, the output's positions inside a run of consecutive output
  elements that one of them holds consecutively, at any offset, forwards or reversed (``_provenance.COPY_RUNS``),
  a run they would hold by chance with probability ``_provenance.RUN_FALSE`` at most, however little of the output
  each holds, and the positions whose values they hold element by element, in any
  order, where that beats chance (``_provenance.ELEMENT_SHARE``: a neighbouring bit pattern's rate).

An output's DSL share is the smaller of the two. The rule: at least one output at least half
produced by the DSL (``OUTPUT_SHARE``), the DSL's share of all outputs' input-dependent elements at
least 1/64 (``TOTAL_SHARE``), and its shares of the answer's parts more than half on average
(``OUTPUTS_SHARE``: an operator's returned outputs are each a part of its answer, whatever their sizes, and its
in-place state is one part, weighted within by the elements the operator changes in each tensor (``parts_share``);
one of two parts wholly the DSL's and the other wholly eager is half of the answer, not most of it).
Weighting every output by its elements would fail the p49 plan below (5.9% of the elements), and requiring every
large output to be the DSL's would too (its eager logits are 94% of them), so returned outputs stay counted once;
what the red team's p26 case (rt10 F5) exploited was two tiny in-place outputs counted as two parts.
All hold for the study's partial plans (p49: the DSL computes two of the three outputs, the routing
weights and ids, 5.9% of the elements, eager the router logits: 2/3; p52: a DSL quantisation whose
result the eager GEMM consumes, 100% dependent) and fail a kernel computing 1 of 64 rows or 1 of 32
layers of the only output, or only p49's ids (2.9% of the elements, 1/3 of the outputs). A raise with
launches suppressed is no evidence of anything: it fails.

The correctness draws are observable (the provenance mode, the sentinel fill, their place first), so the
coverage they measure must be shown to hold on the timed calls too, with evidence the submission cannot
see or forge there: the time spent inside its DSL launches, measured by the gate's vault at the native
launch boundary (``_provenance``). An honest submission runs the same kernels on same-shaped inputs in
both, so the timed calls launch the same kernels with arguments of the same shapes, their DSL time is
about the draws', and so is the work their launches do to memory. One that runs its kernels only when audited
and an eager answer with a token launch otherwise launches another kernel, or the same on other shapes
(``kernels_check``), or, with the same launches doing less work, has its DSL time collapse
(``dsl_time_check``) or, where a launch's fixed cost hides that, changes fewer bytes and leaves fewer output
elements, or makes fewer of the values an output holds wherever eager code copied them, than the draws' launches did
(``work_check``), or writes values its other arguments held before it, copied
rather than computed, more than the draws' launches did (``copied_check``).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from mkbsim.verifier._compare import OutputRef, matches, wrong_mask

OUTPUT_SHARE = 0.5
TOTAL_SHARE = 1 / 64
OUTPUTS_SHARE = 0.5
#: The timed calls' median DSL time must be at least this share of the least DSL time of a correctness
#: draw. The draws' time can only be inflated against the timed calls' (a cold first launch, argument
#: pages or caches the timed calls find warm, on cuda an idle GPU's clocks and the launch latency left in
#: the measure when the draw's launch finds the stream empty), so the draws' least time is the fair one,
#: and the share leaves room for that inflation. Honest ratios measured (benchmarks/RESULTS.md, "DSL-time
#: ratio"): on the H200 at least 0.92 (32 reference solutions, production shapes); on this 2-core VM at
#: SMOKE sizes under load 9-18 at least 0.53 (the examples, tests/verifier/honest and a red team's 11
#: honest styles), where a launch's fixed cost (~10 µs) is a third of a small kernel's: a launch of the same
#: kernel doing no work measured 0.378 there. Since the timed calls run back to back in blocks (``_blocks``)
#: the evidence calls' launches are warm and the audited draws' still pay the audit around them: on the merged
#: blocks code (with the work rule) on cpu the honest cases measured 0.48-1.89 (34 verifications, load 4-13) and
#: the idle-kernel case 0.13-0.23 (5): 0.33 is their geometric mean, 1.45x from each (benchmarks/RESULTS.md,
#: "DSL-time ratio on the merged blocks code"). On the H200 (2026-12-02, blocks code) the p36 CuTe DSL solution
#: through TVM FFI measured 0.47-0.48 in four rounds of two verifications (draws 44-92 µs against 21-29 µs: the
#: draws' launches of that host path are inflated, the cause not identified), the other kernels run 0.94-1.16:
#: cuda takes cpu's share (0.6 rejected an honest kernel; the work rule, not this one, rejects idle kernels).
DSL_TIME_SHARE = {"cpu": 0.33, "cuda": 0.33}
#: ...and of the draws' long part (``_control.DSL_LONG_MS``: each launch's time beyond its fixed cost,
#: ``_provenance.LAUNCH_FIXED_MS``), the least of a draw's. The flat share above is set by launches of µs, whose fixed
#: cost (a cold host path on a watched call) is most of their time; a launch of milliseconds has no such excuse, and
#: the flat share let a timed call run a third of a slow kernel's work beside an eager answer (red team rt36 F1: p32's
#: MLP, 0.34 of the draws' 108 ms, speedup 1.7-2.2x its honest twin's, as a full plan). Launches added to buy room (a
#: tick each) add nothing to the long part. cuda: no measurement of honest long launches on this code yet (None).
DSL_TIME_LONG_SHARE: dict[str, float | None] = {"cpu": 0.7, "cuda": None}
#: ...where that least long part is at least this long: a draw's launches of a few µs each pay the watched call's
#: costs (cold caches, the audit around them) beyond any fixed allowance under load, which the flat share absorbs; a
#: kernel of milliseconds cannot be split under it (each watched launch costs its fixed part, and the Python-objects
#: rule bounds how many launches a call makes).
DSL_TIME_LONG_MIN_MS = 0.5
#: Below the clocks' resolution nothing is measured (CUDA events: 0.5 µs; cpu: the launching thread's CPU clock,
#: read around a native call).
DSL_TIME_SLACK_MS = {"cpu": 0.0002, "cuda": 0.002}
#: The share of timed calls that must launch every kernel signature (kernel and argument kinds: ranks, element
#: sizes, the sizes the problem fixes, ``_launchkind``) of at least one correctness draw. More than half, so that the
#: median call is one of them; short of all, for kernels an honest plan launches depending on the data (a skipped
#: empty expert).
KERNELS_SHARE = 0.75
#: The share of evidence calls that may give a launch another value than every correctness draw gave one of its
#: arguments (``fixed_check``): half, so that the median call (whose time is scored) is given the draws' values. A
#: switch the timed calls alone are given differs on all of them; a count the data draws from a few values may repeat
#: on the five draws by chance and then differ on more than half of ten calls: for a value of probability p,
#: p^5 * P(Binomial(10, 1 - p) >= 6), at most 1.3% (p near 0.57) per value, the values a number may repeat at added
#: (red team rt48: 2.1% for p26's update_counts.max()). Measured on honest cases: benchmarks/RESULTS.md, "The
#: fixed-arguments rule".
FIXED_CALLS = 0.5
#: ... and a small tensor's byte the data made, alike on the draws by chance, only where it differed on every evidence
#: call, at least this many: for a value of probability p, p^5 * (1 - p)^n, at most 7e-5 (n = 10) per byte; p26's
#: lengths, counts and offsets together, 0.13% of verifications (red team rt48's pool of inputs, 3,000 trials).
FIXED_CHANCE_CALLS = 8
#: The evidence calls' median work must be at least this share of the correctness draws' median, in both of its
#: measures: the bytes the launches change to a nonzero value in their arguments (a zero written over a reused
#: block's zero changes nothing, over the draws' sentinel it would), and each output's share of elements holding what a
#: launch wrote there. The draws' side can only be inflated against the timed calls' (fresh memory there holds the
#: sentinel, which every write changes; reused memory may already hold a value an honest kernel writes again).
#: Honest ratios measured: benchmarks/RESULTS.md, "Work on the evidence calls".
WORK_SHARE = 0.5
#: An output's share is read at its sampled positions (``_provenance.SAMPLES``): below this share of them on the draws
#: (32 of 512) halving it is within the sampling noise, and only the bytes changed are judged (an in-place cache
#: update that writes a few entries).
WORK_SAMPLED_FLOOR = 1 / 16
#: An output's carried share (``_provenance.carried_share``: its sampled elements whose values are among those the
#: launches made, wherever eager code copied them to, beyond a neighbouring bit pattern's rate) is judged where the
#: draws' median reaches this: the share the order-free copy check needs beyond chance (``_provenance.ELEMENT_SHARE``).
#: Below it the estimate is noise: an honest bf16 output eager code sums from DSL partials, or an eager answer beside a
#: scratch launch of another input, measured 0.0-0.08 (the best of presence and multiplicity, per launch argument and
#: pooled: a maximum of noisy estimates). Red team rt22 F2: the draws returned ``out.clone()`` (a launch-left share of
#: 0, under ``WORK_SAMPLED_FLOOR``; a carried share of 1.0), the timed calls an eager answer beside a scratch launch.
WORK_CARRIED_FLOOR = 0.25
#: A floating output's median share on the evidence calls may fall short of the draws' by at most this much (besides
#: ``WORK_SHARE``): there a launch writing a value the memory already held is rare (the zeros fresh pages hold are not
#: counted on either side, ``_provenance``'s ``left_share``), so half the draws' share was a budget a submission could
#: spend on purpose (red team rt14: the DSL doing 58% of the rows on the draws, 31% on the timed calls, eager code the
#: rest). What is left: the median of 10 calls' shares of 512 samples against the draws' (a binomial standard error
#: of 0.02 per call at a share of one half), and an honest kernel whose plan moves rows between the DSL and eager code
#: with the data. Integer and boolean outputs keep ``WORK_SHARE`` alone: reused memory holds their few values often.
FLOAT_SHARE_MARGIN = 0.15
#: ... and what it falls short by within that margin is eager work the draws did not see: the verdict's plan prices
#: it (``_plankind.with_timed_shortfall``; red team rt45 F1: a p07 kernel skipping 2 of 16 heads on every call the
#: dispatch mode did not watch, eager code making them, was a full plan at 0%). The carried share is priced where the
#: draws' median reaches this: below it the estimate is noisy (an honest p51 kernel's eager combine carried 0.47-0.56
#: of its output on the draws, 0.48-0.61 on the evidence calls), above it the copy is clear (a cloned DSL output: 0.99
#: on both).
CARRIED_PRICED_FROM = 0.9

#: An output's median share of sampled elements that the evidence calls' launches copied (``_provenance.launch_copies``:
#: values their other arguments held before them) may exceed the correctness draws' median by at most this much. The
#: draws measure it alike: what an honest kernel copies (a cache append of the inputs' rows) is their share too, and a
#: verdict is all or none of an output's elements whose values the arguments hold, so one odd honest call moves a
#: median by little.
COPIED_MARGIN = 0.25
#: ... on at most this share of the evidence calls: a copy on some calls only (an answer computed ahead by an earlier
#: call, rt12 F0: every other call) must not hide under a median.
COPIED_CALLS = 0.25


#: A floating output's elements that a zero gets right are not judged, unless fewer than this share of its
#: input-dependent elements are left (an output near zero throughout: judged whole, as before).
ZERO_KEPT = 0.125


@dataclass
class OutputCoverage:
    label: str
    informative: int  # input-dependent elements in the suppressed draw
    suppressed_wrong: float | None = None  # share of them wrong with launches suppressed
    eager_match: float = 0.0  # the largest share any DSL-free tensor matched, in any draw
    eager_source: str | None = None

    @property
    def dsl_share(self) -> float:
        wrong = self.suppressed_wrong if self.suppressed_wrong is not None else 0.0
        return min(wrong, 1.0 - self.eager_match)

    def as_dict(self) -> dict[str, Any]:
        return {
            "output": self.label, "informative_elements": self.informative, "suppressed_wrong": self.suppressed_wrong,
            "eager_match": self.eager_match, "eager_source": self.eager_source, "dsl_share": self.dsl_share,
        }  # fmt: skip


@dataclass
class CoverageVerdict:
    outputs: list[OutputCoverage] = field(default_factory=list)
    total_share: float = 0.0
    outputs_share: float = 0.0  # the answer's parts' DSL shares on average (``parts_share``)
    failure: str | None = None  # the feedback when the rule is broken


def informative_mask(ref: OutputRef, other: OutputRef | None, before: Any | None) -> torch.Tensor:
    """Input-dependent elements: changed by the operator (in-place: ``before`` is the input as given), or
    different in another draw's anchor; of a returned floating output, only those a zero would get wrong
    (``ZERO_KEPT``)."""
    anchor = torch.as_tensor(ref.anchor).reshape(-1)
    if before is not None:  # suppressed launches leave the input's own values there, not a fill
        return (anchor != torch.as_tensor(before).reshape(-1).to(anchor.dtype)).cpu()
    if other is None:
        varied = torch.ones(anchor.numel(), dtype=torch.bool)
    else:
        varied = (anchor != torch.as_tensor(other.anchor).reshape(-1).to(anchor.dtype)).cpu()
    if not ref.is_float:
        return varied
    # an element a zero gets within the allowance says nothing of who made it: an honest kernel writing into
    # ``zeros_like`` leaves zeros with its launches suppressed, and those "stayed correct" wherever the answer is within
    # the allowance of zero (red team rt40 FP1: p65's heavy-tailed bf16 output, max ~107, allowance ~2.5: 69% of it,
    # its DSL share 0.31, rejected as decorative; with ``empty_like`` it passed)
    judged = varied & wrong_mask(torch.zeros_like(anchor), ref).cpu()
    return judged if int(judged.sum()) >= ZERO_KEPT * int(varied.sum()) else varied


def suppressed_shares(
    outs: Sequence[Any], refs: Sequence[OutputRef], masks: Sequence[torch.Tensor]
) -> list[OutputCoverage]:
    found = []
    for out, ref, mask in zip(outs, refs, masks, strict=True):
        n = int(mask.sum())
        cov = OutputCoverage(ref.label, n)
        if n:
            wrong = wrong_mask(out, ref).cpu()
            cov.suppressed_wrong = float((wrong & mask).sum()) / n
        found.append(cov)
    return found


def _beyond_chance(values: Any, ref: OutputRef, positions: torch.Tensor, informative: torch.Tensor) -> float:
    """The share of informative sampled positions where a DSL-free tensor holds the answer, beyond coincidence.

    A low-precision output agrees with unrelated values of its own dtype at many positions (fp8 has 256 values:
    an in-place KV append's fresh entries equalled the old cache's at 13% of them on the H200). The same values
    paired with the answers of other sampled positions (rolled by one) give the chance rate; only agreement
    beyond it counts, rescaled to [0, 1]."""
    n = int(informative.sum())
    same = float((matches(values, ref, positions) & informative).sum()) / n
    rolled = torch.roll(torch.as_tensor(values, dtype=torch.float64), 1)
    chance = float((matches(rolled, ref, positions) & informative).sum()) / n
    return max(0.0, (same - chance) / (1.0 - chance)) if chance < 1.0 else 0.0


def apply_provenance(
    coverage: Sequence[OutputCoverage],
    records: Sequence[Any],
    refs: Sequence[OutputRef],
    masks: Sequence[torch.Tensor],
    positions: Sequence[torch.Tensor],
    where: str,
) -> None:
    """Lower each output's DSL share by the best match of a DSL-free tensor of one draw."""
    for record in records:
        if record[0] not in ("candidate", "contains", "result", "produced"):
            continue  # the draw's eager operators (``_eagerwork``), faults (judged before)
        kind, source, i = record[0], record[1], record[2]
        if kind == "result" and record[4]:
            continue  # judged element by element by its "produced" record
        if not (0 <= i < len(refs)):
            continue
        informative = masks[i][positions[i]]
        n = int(informative.sum())
        if n == 0:
            continue
        if kind == "contains":  # an eager-made tensor holds the output's values: the positions it covers
            share = float((torch.tensor(record[3], dtype=torch.bool) & informative).sum()) / n
        elif kind == "produced":  # 0: no launch left these bytes (1: one did; 2: left as they were, all zero)
            share = float(((torch.tensor(record[3]) == 0) & informative).sum()) / n
        else:
            share = _beyond_chance(record[3], refs[i], positions[i], informative)
        if share > coverage[i].eager_match:
            coverage[i].eager_match = share
            coverage[i].eager_source = f"{source}, {where}"


def parts_share(coverage: Sequence[OutputCoverage], inplace: int = 0) -> float:
    """The DSL's share of the answer's parts on average (``OUTPUTS_SHARE``): each returned output is one part, and
    the in-place state (the last ``inplace`` entries) is one more, its share weighted by the elements the operator
    changes in each of its tensors. A state's tensors are one update (a cache and its scales, a block table and its
    counts), and what the operator changes in them is the answer, not the tensors' number: counted once each, the
    red team's p26 case (rt10 F5: a Python answer copied into the slot mappings, 0% the DSL's) was carried to 2/3 by
    a block table and its counts updated by a kernel, 10 and 7 changed elements."""
    returned = [c for c in coverage[: len(coverage) - inplace] if c.informative]
    state = [c for c in coverage[len(coverage) - inplace :] if c.informative]
    shares = [c.dsl_share for c in returned]
    if state:
        shares.append(sum(c.dsl_share * c.informative for c in state) / sum(c.informative for c in state))
    return sum(shares) / len(shares) if shares else 0.0


def judge(coverage: Sequence[OutputCoverage], inplace: int = 0) -> CoverageVerdict:
    """The rule on each output's DSL share; the last ``inplace`` entries are the in-place inputs (``parts_share``)."""
    counted = [c for c in coverage if c.informative]
    verdict = CoverageVerdict(list(coverage))
    total = sum(c.informative for c in counted)
    produced = [c for c in counted if c.dsl_share >= OUTPUT_SHARE]
    verdict.total_share = sum(c.dsl_share * c.informative for c in produced) / total if total else 0.0
    verdict.outputs_share = parts_share(coverage, inplace)
    if produced and verdict.total_share >= TOTAL_SHARE and verdict.outputs_share > OUTPUTS_SHARE:
        return verdict
    worst = max(counted, key=lambda c: c.dsl_share, default=None)
    if worst is None:
        verdict.failure = "no output has input-dependent elements to measure; the bypass test cannot pass."
        return verdict
    why = [_explain(c) for c in counted]
    verdict.failure = (
        "The DSL kernels do not produce the outputs: " + "; ".join(why) + ". A DSL kernel must produce at least "
        f"{OUTPUT_SHARE:.0%} of one output, {TOTAL_SHARE:.1%} of all outputs' input-dependent elements and "
        f"more than {OUTPUTS_SHARE:.0%} of the outputs on average (each returned output counted once, the in-place "
        "state once, by the elements the operator changes); do the operator's work in the DSL, not in eager code "
        "around it."
    )
    return verdict


def _explain(c: OutputCoverage) -> str:
    parts = []
    if c.suppressed_wrong is not None:
        parts.append(f"with every DSL launch's effect undone, {1 - c.suppressed_wrong:.1%} of it stayed correct")
    if c.eager_match > 0:
        parts.append(f"{c.eager_match:.1%} of it existed outside the DSL ({c.eager_source})")
    return f"{c.label}: " + ", ".join(parts) if parts else f"{c.label}: no evidence"


def dsl_time_check(
    audited_ms: Sequence[float], timed_ms: Sequence[float], device_type: str, audited_long_ms: Sequence[float] = ()
) -> tuple[dict[str, Any], str | None]:
    """The timed calls' DSL time against the correctness draws' (DESIGN §5, "audits cannot be told apart"):
    its figures, and the feedback when the timed calls ran too little DSL work. ``audited_long_ms``: the draws'
    long parts (``_control.DSL_LONG_MS``), held to ``DSL_TIME_LONG_SHARE`` where the device has one."""
    audited = min(audited_ms)
    timed = float(statistics.median(timed_ms))
    share, slack = DSL_TIME_SHARE[device_type], DSL_TIME_SLACK_MS[device_type]
    long_share = DSL_TIME_LONG_SHARE.get(device_type)
    long = min(audited_long_ms) if audited_long_ms and long_share is not None else 0.0
    long = long if long >= DSL_TIME_LONG_MIN_MS else 0.0
    required = max(share * audited, (long_share or 0.0) * long)
    found = {
        "audited_ms": list(audited_ms),
        "audited_long_ms": list(audited_long_ms),
        "timed_median_ms": timed,
        "ratio": timed / audited if audited > 0 else None,
        "required_ratio": share,
        "required_ms": required,
    }
    if timed >= required - slack:
        return found, None
    return found, (
        f"The timed calls spent {timed * 1e3:.1f} µs per call (median) inside DSL launches, the correctness draws "
        f"at least {audited * 1e3:.1f} µs: the timed calls do not run the kernels the correctness draws checked "
        f"(at least {required * 1e3:.1f} µs is required: {share:.0%} of their DSL time, and {long_share or 0:.0%} of "
        f"what their launches took beyond a launch's fixed cost). Run the same DSL work on every call."
    )


def work_check(
    audited: Sequence[dict[str, Any] | None],
    timed: Sequence[dict[str, Any] | None],
    floating: Sequence[bool] = (),
    credited: Sequence[bool] | None = None,
) -> tuple[dict[str, Any], str | None]:
    """The work the evidence calls' launches did against the correctness draws' (DESIGN §5, "audits cannot be
    told apart"): its figures, and the feedback when the timed calls' launches did too little of it. Time cannot
    tell a launch that did the work from one that did nothing (a launch's fixed cost is most of a small kernel's
    time); the bytes it changed, and the outputs' elements still holding them, can. A call without the record
    (it never returned its outputs) did none. ``floating[i]``: output i is of a floating dtype (its shares are held
    within ``FLOAT_SHARE_MARGIN`` of the draws' too). ``credited[i]``: the draws' coverage credits output i to the DSL
    (its ``dsl_share`` at least ``WORK_SAMPLED_FLOOR``); an output it does not is not judged (None: all are): what the
    draws' launches wrote there was no work of theirs (red team rt45's p54 kernel casting an eager ``v`` for the
    output: the decode rule takes the cast from the evidence calls' work, and the draws' coverage had taken it from
    theirs, but their launch-left share counted it; a partial plan like the study's p56 was rejected).

    Each output is judged on two shares: its elements whose bytes are what a launch left there (``shares``), where the
    draws' median reaches ``WORK_SAMPLED_FLOOR``, and its elements whose values are among those the launches made,
    wherever its memory came from (``carried``, ``_provenance.carried_share``), where the draws' median reaches
    ``WORK_CARRIED_FLOOR``: an output the draws returned as
    an eager copy of what their launches computed (``out.clone()``: red team rt22 F2) has no launch-left share to judge,
    and its credit was carried through the copy."""
    if not audited or not timed:
        return {}, None
    outputs = max((len(w["shares"]) for w in (*audited, *timed) if w is not None), default=0)

    def median(records: Sequence[dict[str, Any] | None], pick: Any) -> float:
        return float(statistics.median(pick(w) if w is not None else 0.0 for w in records))

    def share(i: int, measure: str) -> Any:
        return lambda w: w[measure][i] if i < len(w.get(measure, ())) else 0.0

    # measure 0: the bytes; 1..outputs: the launch-left shares; then the carried shares
    picks = [lambda w: w["bytes"]] + [share(i, m) for m in ("shares", "carried") for i in range(outputs)]
    draws = [median(audited, pick) for pick in picks]
    calls = [median(timed, pick) for pick in picks]
    found = {
        "draws_bytes": draws[0], "timed_bytes": calls[0], "draws_output_shares": draws[1 : outputs + 1],
        "timed_output_shares": calls[1 : outputs + 1], "draws_carried_shares": draws[outputs + 1 :],
        "timed_carried_shares": calls[outputs + 1 :], "required_ratio": WORK_SHARE,
        "ratios": [c / d if d > 0 else None for c, d in zip(calls, draws, strict=True)],
        # bytes taken from the evidence calls' work as a simple map of values there before the launch (the decode rule)
        "timed_decoded_bytes": median(timed, lambda w: w.get("decoded", 0)),
    }  # fmt: skip
    def owned(k: int) -> bool:  # measure k's output is the DSL's by the draws' coverage
        output = (k - 1) % outputs
        return credited is None or output >= len(credited) or credited[output]

    judged = [0] + [k for k in range(1, len(draws)) if owned(k) and draws[k] >= (WORK_SAMPLED_FLOOR if k <= outputs
                                                                                  else WORK_CARRIED_FLOOR)]  # fmt: skip

    def least(k: int) -> float:  # what measure k of the evidence calls must reach
        output = (k - 1) % outputs if k > 0 else -1
        close = k > 0 and output < len(floating) and floating[output]
        return max(WORK_SHARE * draws[k], draws[k] - FLOAT_SHARE_MARGIN) if close else WORK_SHARE * draws[k]

    def priced(k: int) -> bool:  # a floating output's launch-left share, or its carried share where it is clear
        output = (k - 1) % outputs
        clear = k <= outputs or draws[k] >= CARRIED_PRICED_FROM
        return k > 0 and output < len(floating) and floating[output] and clear

    found["required"] = [least(k) for k in range(len(draws))]
    found["judged"] = judged  # the measures (indices of ``ratios``) the rule holds to ``required``
    found["float_shortfall"] = max((draws[k] - calls[k] for k in judged if priced(k)), default=0.0)
    short = [k for k in judged if calls[k] < least(k)]
    if not short:
        return found, None

    def said(k: int) -> str:
        if k == 0:
            return f"changed {calls[0]:.0f} bytes of their arguments per call (median), the correctness draws' " + (
                f"{draws[0]:.0f}"
            )
        if k <= outputs:
            return f"left {calls[k]:.1%} of output {k - 1}'s elements as they wrote them, the correctness draws' " + (
                f"{draws[k]:.1%}"
            )
        return (
            f"made the values of {calls[k]:.1%} of output {k - 1 - outputs}'s elements (wherever eager code copied "
            f"them to), the correctness draws' {draws[k]:.1%}"
        )

    what = [said(k) for k in short]
    if found["timed_decoded_bytes"]:
        what.append(
            f"they changed {found['timed_decoded_bytes']:.0f} bytes more (median) to values a simple map of what their "
            "arguments held before the launch recovers (an answer computed elsewhere in another form, undone by the "
            "launch), which are not their work"
        )
    return found, (
        "The DSL launches of the timed calls " + "; ".join(what) + f" (at least {WORK_SHARE:.0%} of "
        f"the draws' is required, and of a floating output the draws' share less {FLOAT_SHARE_MARGIN:.0%}): the timed "
        "calls do not run the DSL work the correctness draws checked, or their outputs are not what it wrote. Run the "
        "same DSL work on every call and return what it computes."
    )


def kernels_check(
    audited: Sequence[frozenset[int]], timed: Sequence[frozenset[int]]
) -> tuple[dict[str, Any], str | None]:
    """The timed calls launch what one correctness draw launched: each call's signatures (launch kinds,
    ``_launchkind``) must include every signature of at least one draw (all draws run at the same input shapes), so
    that draws made to disagree on purpose (an argument's shape varied per draw) leave nothing unrequired."""
    complete = [k + 1 for k, launched in enumerate(timed) if any(draw <= launched for draw in audited)]
    missing = [k + 1 for k in range(len(timed)) if k + 1 not in complete]
    found = {
        "draw_signatures": sorted(len(draw) for draw in audited),
        "shared_by_all_draws": len(frozenset.intersection(*audited)) if audited else 0,
        "timed_calls_missing_them": len(missing),
    }
    if len(complete) >= KERNELS_SHARE * len(timed):
        return found, None
    return found, (
        f"{len(missing)} of {len(timed)} timed calls (calls {', '.join(map(str, missing[:5]))}"
        f"{', ...' if len(missing) > 5 else ''}) did not launch all the DSL kernels, with the argument shapes the "
        "problem fixes, that any one correctness draw launched: the timed calls do not run the kernels the "
        "correctness draws checked. Run the same DSL work on every call."
    )


def fixed_check(changed: Sequence[tuple[int, int, int, int] | None]) -> tuple[dict[str, Any], str | None]:
    """The evidence calls' launches given what every correctness draw gave them (``changed``: per evidence call, in
    call order, ``_control``'s ``fixed_changed``: 0 where so, 1 where a launch's argument was another number or tensor
    layout than the draws' one, 2 where a tensor argument held other bytes where every draw held the same bytes
    constants made, with the first such argument's position; then whether a byte alike on the draws by chance, a small
    tensor's the data made, has differed on every evidence call so far, and its argument's position; None: the call's
    record is missing, which counts as changed). A number (a count of heads, a switch), a tensor's sizes or its
    contents (a zeros workspace, a flag) that every draw gave a launch tell the kernel what work to do, and the timed
    calls given another run work the draws did not check (``_provenance.fixed_by_draws``, ``fixed_content``). At most
    ``FIXED_CALLS`` of the evidence calls may be: a value the data draws from a few may repeat on the draws by
    chance. A small tensor's bytes the data made repeat on the draws by chance more often (p26's lengths, counts and
    offsets: over half of ten timed calls changed in a third of verifications, red team rt48): judged only where one
    of its bytes differed on every evidence call, at least ``FIXED_CHANCE_CALLS`` of them."""
    which = [k + 1 for k, found in enumerate(changed) if found is None or found[0]]
    what: dict[str, set[int]] = {"value": set(), "contents": set()}
    for call in changed:
        if call is not None and call[0]:
            what["value" if call[0] == 1 else "contents"].add(call[1] - 1)
    recorded = [call for call in changed if call is not None]
    every = len(recorded) >= FIXED_CHANCE_CALLS and recorded[-1][2] == 1
    if every:
        what["contents"].add(recorded[-1][3] - 1)
    arguments = {kind: sorted(positions) for kind, positions in what.items()}
    found = {"calls_changed": which, "arguments": arguments, "allowed_share": FIXED_CALLS, "every_call": every}
    if len(which) <= FIXED_CALLS * len(changed) and not every:
        return found, None
    said = [f"argument {', '.join(map(str, at[:4]))}'s {kind}" for kind, at in arguments.items() if at]
    return found, (
        f"On {len(recorded) if every else len(which)} of {len(changed)} timed calls a DSL launch was given, as "
        f"{' and '.join(said) or 'an argument'} (counted from 0), another number, tensor size or stride, or other "
        "tensor bytes than every correctness draw gave that launch there: the timed calls tell the kernels to do other "
        "work than the correctness draws checked. Give every call's launches the arguments its data asks for, the same "
        "way on every call."
    )


def copied_check(
    audited: Sequence[dict[str, Any] | None], timed: Sequence[dict[str, Any] | None]
) -> tuple[dict[str, Any], str | None]:
    """Where the evidence calls' launches' written output came from, against the correctness draws': the work rule
    counts the bytes a launch changed and the elements it left, which a launch copying an answer computed elsewhere
    (eager code, an earlier call) changes and leaves all of. Each output's median share of sampled elements a launch
    copied from values its other arguments held before it may exceed the draws' median by ``COPIED_MARGIN`` on at most
    ``COPIED_CALLS`` of the evidence calls."""
    if not audited or not timed:
        return {}, None
    outputs = max((len(w.get("copied", ())) for w in (*audited, *timed) if w is not None), default=0)

    def copied(w: dict[str, Any] | None, i: int) -> float:
        shares = w.get("copied", ()) if w is not None else ()
        return float(shares[i]) if i < len(shares) else 0.0

    draws = [float(statistics.median(copied(w, i) for w in audited)) for i in range(outputs)]
    calls = [float(statistics.median(copied(w, i) for w in timed)) for i in range(outputs)]
    which = [[k + 1 for k, w in enumerate(timed) if copied(w, i) > draws[i] + COPIED_MARGIN] for i in range(outputs)]
    found = {"draws_copied": draws, "timed_copied": calls, "margin": COPIED_MARGIN, "calls_over": which}
    over = [i for i in range(outputs) if len(which[i]) > COPIED_CALLS * len(timed)]
    if not over:
        return found, None
    what = [
        f"output {i}: on evidence calls {', '.join(map(str, which[i][:10]))} of {len(timed)} (median "
        f"{calls[i]:.1%} of its elements) against the correctness draws' {draws[i]:.1%}"
        for i in over
    ]
    return found, (
        "The DSL launches of the timed calls wrote values their other arguments already held before the launch "
        "(copied, in any order or in runs), not computed: " + "; ".join(what) + f" (more than {COPIED_MARGIN:.0%} "
        f"above the draws' on at most {COPIED_CALLS:.0%} of the calls is allowed). An answer computed elsewhere (eager "
        "code, an earlier call) and copied by a kernel is not DSL work. Run the same DSL work on every call."
    )
