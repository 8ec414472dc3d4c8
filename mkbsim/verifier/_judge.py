"""The rules one answer is judged by (DESIGN §5), each returning the ``Failure`` it finds or None:
the worker's fate, errors, the returned structure, input mutation and the values against the anchor; and
the scored timed calls' launch count and time against the evidence calls'."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from mkbsim.verifier._arena import Arena
from mkbsim.verifier._compare import Check
from mkbsim.verifier._process import WorkerFailed

_DSL_ERROR_MODULES = ("tvm", "tvm_ffi", "cutlass")
#: cuda: what watching costs an evidence call's reported time beyond what the vault's clock measures and the verifier
#: subtracts (``_provenance``: its device copies, synchronised on both sides), per launch in ms: the gate's host work
#: inside the call's event window (an idle GPU's events fire when recorded), evidence minus scored medians 0.063 and
#: 0.074 ms on the H200 for the one-launch p36 and p28 TIRx examples in blocks (2026-12-02; at 0.03 per launch both
#: failed the rule); a scored call chooses its launches, so this is what the round trip costs, not a share of the
#: call. (cpu compares the launches' own time instead: ``scored_dsl_time``.)
EVIDENCE_LAUNCH_COST_MS = 0.1
#: The share of the evidence calls' median launch footprint (bytes their launches' tensor arguments span) the
#: scored calls' median must reach (``scored_footprint``): the same plan spans the same bytes; the share leaves room
#: for launches sized by the data, whose sums vary from call to call (a median of 10 against one of 50).
FOOTPRINT_SHARE = 0.75
#: The share of the evidence calls' own cost (their median less the null calls', the harness's cost around every
#: call) by which the scored calls' may fall short beyond that cost: the noise of a median of 10 calls against one
#: of 50 under load (the p36 example, one launch, load ~11: evidence medians 0.98-1.25x the scored one). A share of
#: the submission's cost, not of the harness's: with large in-place state the harness's copy of it is most of a
#: call (p26 at PRODUCTION on cpu: ~4.8 ms of a 5.5 ms call, the kernel ~0.4 ms), and a quarter of the whole call
#: let a scored call skip all its work (red team rt12 F2).
EVIDENCE_NOISE = 0.25
#: ...less this many standard errors of the two medians' harness part (each holds the null calls' spread: 1.85 MAD
#: over the root of its count is a median's standard error for normal noise, as ``_trusted.cross_check`` takes it).
HARNESS_SIGMAS = 4.0
#: cpu: the share of the evidence calls' median DSL time (the vault's clock over every call's launches) the scored
#: calls' median must reach (``scored_dsl_time``), less a slack a launch: what a scored call that knew it was scored
#: could save of its DSL work. A watched launch starts cold (the vault's work before it fills the caches and
#: predictors the launch's host path uses) and a scored call's launches run back to back: honest cases of 16
#: launches of ~7 µs measured 0.41-0.47 of the watched median (a watched launch ~2.2x a scored one), one-launch
#: kernels of 15-50 µs 0.65-1.07, kernels of 0.15-7 ms 0.72-1.3 (benchmarks/RESULTS.md, "Scored against watched
#: launches").
SCORED_DSL_SHARE = 0.75
#: The slack a launch: ``SCORED_COLD_START`` times the scored calls' own DSL time a launch, at most
#: ``SCORED_DSL_SLACK_MS``, for as many launches as both kinds of call make (the fewer medians). Tied to what the
#: scored calls' launches cost, so that launches the submission adds buy no more slack than they cost it: red team
#: rt21 F1/F3 farmed a flat 20 µs a launch with one-float "tick" launches (~7 µs watched, ~3 µs scored), 700 of them on
#: the watched calls only (the slack from the evidence calls' median count) or 400 on every call, and skipped an 8 ms
#: kernel on the scored calls. Now a tick buys 1.5 times its scored cost and raises the floor by 0.75 times its
#: watched cost (~2.3 times the scored): it costs the scored calls more than it frees.
SCORED_COLD_START = 1.5
SCORED_DSL_SLACK_MS = 0.02
#: cpu, ``scored_host_time``: the share of the scored calls' own CPU time (less the null calls') their host work may
#: take beyond what the draws' eager operators took and the allowances below. An eager answer made only where the
#: draws cannot see it (red team rt23 F1-F8: keyed, permuted, packed, byte planes, small pieces; every encoding) costs
#: its operators' time on every scored call: 0.9 of the call at PRODUCTION on p36 (F1). An honest call's host work is
#: the draws' operators, the gate's cost a launch and its Python.
HOST_SHARE = 0.25
#: ...and the absolute part of the allowance: the harness's and the gate's cost beyond the null calls' (0.2-0.4 ms a
#: call at SMOKE on the 2-core VM, 2026-12-04), a call's Python, and the noise of medians under load. Below a few ms
#: an eager answer costs less than this and the rule does not see it (SMOKE: the hacks' 0.06-0.11 ms over the honest
#: twin); the study's figures are PRODUCTION's.
HOST_FLOOR_MS = 1.0
HOST_LAUNCH_MS = 0.1  # per launch the scored calls make: the gate's cost outside the launch, beyond the floor
#: The draws' eager operators' CPU time, times this: the same operators run on a scored call, in caches the vault's
#: work between them on a draw left colder (so no faster there), plus their dispatch from Python.
HOST_EAGER_SLACK = 1.5


@dataclass(frozen=True)
class Failure:
    """A broken rule: its code (``FAILURES``) and the feedback an agent acts on."""

    code: str
    feedback: str
    #: the rule compared times: the failure stands only if a second timing round fails too (DESIGN §5)
    measured: bool = False


def fmt(x: float) -> str:
    return f"{x:.4g}"


def error_text(error: dict[str, Any]) -> str:
    text = f"{error.get('type', 'Exception')}: {error.get('message', '')}".strip()
    frames = error.get("frames") or []
    if frames:
        lineno, func, code = frames[-1]
        text += f"\n  at line {lineno} in {func}: {code}"
    return text


def worker_failed(exc: WorkerFailed, where: str, details: dict[str, Any]) -> Failure:
    if exc.kind == "timeout":
        return Failure("timeout", f"No answer {where}: {exc} (the process was killed).")
    if exc.kind == "memory":
        return Failure("memory", f"Memory limit exceeded {where}: {exc} (the process was killed).")
    if exc.kind == "crash":
        details["crash_status"] = exc.status
        return Failure("crash", f"The process died {where}: {exc}.")
    return Failure("harness_tamper", f"The worker's answer {where} was not well-formed: {exc}.")


def call_error(reply: dict[str, Any], where: str, first: bool) -> Failure:
    error = reply.get("error") or {}
    if error.get("memory"):
        return Failure("memory", f"run() ran out of memory {where}: {error_text(error)}")
    if first and str(error.get("type", "")).startswith(_DSL_ERROR_MODULES):
        return Failure("compile_error", f"The DSL failed {where} (first call): {error_text(error)}")
    return Failure("exception", f"run() raised {where}: {error_text(error)}")


def tampering(reply: dict[str, Any], where: str) -> Failure | None:
    timers = [str(t) for t in reply.get("timer_tampered") or []]
    if timers:
        return Failure("timing_tamper", f"Timing functions were replaced {where}: {', '.join(timers)}.")
    hooks = [str(t) for t in reply.get("tampered") or []]
    if hooks:
        return Failure("harness_tamper", f"The verifier's hooks were replaced {where}: {', '.join(hooks)}.")
    return None


def structure(
    reply: dict[str, Any],
    where: str,
    labels: Sequence[str],
    out_specs: Sequence[Any],
    device_type: str,
    input_names: Sequence[str],
) -> Failure | None:
    """Container and tensor types, laziness, device, shape and dtype of every output; aliasing."""
    if reply.get("modes") or reply.get("left_mode"):
        return Failure(
            "lazy_output",
            f"A torch function or dispatch mode was active around run() {where}; enter and exit modes within run().",
        )
    facts = reply.get("structure") or {}
    expected = "single" if len(out_specs) == 1 else "tuple"
    items = facts.get("items") or []
    if facts.get("container") != expected or len(items) != len(out_specs):
        want = "one tensor" if expected == "single" else f"a tuple (or a NamedTuple) of {len(out_specs)} outputs"
        return Failure(
            "type_mismatch", f"run() returned {facts.get('container')} {where}; the reference returns {want}."
        )
    for label, fact, spec in zip(labels, items, out_specs, strict=False):
        failure = _item(label, fact, spec, where, device_type)
        if failure is not None:
            return failure
    if reply.get("alias"):
        out_i, in_j = reply["alias"][0]
        name = input_names[in_j] if in_j < len(input_names) else in_j
        label = labels[out_i] if out_i < len(labels) else f"output {out_i}"
        return Failure("output_alias", f"{label} {where} shares memory with input '{name}'; return a new tensor.")
    if not reply.get("copied"):
        return Failure("harness_tamper", f"The worker did not deliver the outputs {where}.")
    return None


def _item(label: str, fact: dict[str, Any], spec: Any, where: str, device_type: str) -> Failure | None:
    kind = fact.get("kind")
    if spec is None:
        if kind != "scalar":
            return Failure("type_mismatch", f"{label} {where} is a {fact.get('type')}, expected a Python number.")
        return None
    if kind == "subclass":
        return Failure(
            "lazy_output", f"{label} {where} is a tensor subclass ({fact.get('type')}); return a plain torch.Tensor."
        )
    if kind != "tensor":
        return Failure("type_mismatch", f"{label} {where} is a {fact.get('type')}, expected a torch.Tensor.")
    if fact.get("lazy"):
        return Failure("lazy_output", f"{label} {where} is {fact['lazy']}; return a materialized tensor.")
    if fact.get("device") != device_type:
        return Failure("device_mismatch", f"{label} {where} is on {fact.get('device')}, expected {device_type}.")
    shape, dtype = spec
    if tuple(fact.get("shape") or ()) != tuple(shape):
        return Failure(
            "shape_mismatch", f"{label} {where} has shape {tuple(fact.get('shape') or ())}, expected {tuple(shape)}."
        )
    want = str(dtype).removeprefix("torch.")
    if fact.get("dtype") != want:
        return Failure("dtype_mismatch", f"{label} {where} has dtype {fact.get('dtype')}, expected {want}.")
    return None


def mutation(
    arena: Arena, private: Sequence[Any], where: str, names: Sequence[str], inplace: Sequence[int]
) -> Failure | None:
    for j, (shared, mine) in enumerate(zip(arena.args, private, strict=True)):
        if j in inplace or not isinstance(mine, torch.Tensor):
            continue
        if not torch.equal(shared, mine):
            allowed = ", ".join(f"'{names[i]}'" for i in inplace)
            rule = f"only {allowed} may be updated in place" if allowed else "this operator updates no input in place"
            return Failure("input_mutation", f"run() modified input '{names[j]}' {where}; {rule}.")
    return None


def values(checks: Sequence[Check], where: str, factor: float) -> Failure | None:
    for c in checks:
        if c.nan:
            return Failure("nan", f"{c.label} {where} contains NaN (the anchor has none).")
    for c in checks:
        if c.ok:
            continue
        at = f" at index {c.worst_index}" if c.worst_index is not None else ""
        if c.exact:
            return Failure(
                "wrong_output",
                f"{c.label} {where} differs from the reference in {c.mismatches} elements "
                f"(first{at}: got {c.got}, expected {c.expected}); integer outputs must match exactly.",
            )
        error = "|out - anchor|" if c.per_element else "max |out - anchor|"
        rule = (
            f"allowance per element = {fmt(factor)} x max(the reference's error there, one fp8 step of the expected "
            "value), at least the smallest normal"
            if c.per_element
            else f"allowance = {fmt(factor)} x max(reference error {fmt(c.ref_error)}, "
            f"eps(dtype) x max|anchor| {fmt(c.eps_term)})"
        )
        return Failure(
            "wrong_output",
            f"{c.label} {where}: {error} = {fmt(c.max_error)} exceeds the allowance {fmt(c.allowance)}{at} "
            f"(got {fmt(c.got or 0.0)}, expected {fmt(c.expected or 0.0)}; {c.mismatches} elements over; {rule}).",
        )
    return None


def scored_launches(scored: Sequence[int], evidence: Sequence[int]) -> Failure | None:
    """The scored timed calls launch as many genuine DSL kernels as the evidence calls (DESIGN §5, "audits
    cannot be told apart"): the count is all a scored call records, so a submission doing less DSL work
    whenever it guesses a call is scored shows here. The median scored call against the fewest launches of
    an evidence call: an honest kernel whose launch count varies with the data passes."""
    if not scored or not evidence:
        return None
    fewest, median = min(evidence), statistics.median(scored)
    if median >= fewest:
        return None
    return Failure(
        "decorative_dsl",
        f"The timed calls launched {median:g} DSL kernels per call (median), fewer than every call the verifier "
        f"watched ({fewest} or more): the timed calls do not run the DSL work the verifier checked. Run the same "
        "DSL work on every call.",
    )


def scored_footprint(scored: Sequence[int], evidence: Sequence[int]) -> Failure | None:
    """The bytes the scored calls' launches spanned in their tensor arguments against the evidence calls' (DESIGN
    §5, "audits cannot be told apart"): the same plan on inputs of the same shapes spans the same bytes, so a
    scored call launching its kernels over a token slice (a row, while eager code makes the answer) shows here
    whatever its time. Medians against ``FOOTPRINT_SHARE``: launches sized by the data (ragged, paged, routed
    problems) vary from call to call, and a guess that misses a few evidence calls moves their least, not their
    median; a kernel given whole tensors and told by a number to do one row of them is no smaller here (the time
    rule bounds that one)."""
    if not scored or not evidence:
        return None
    watched, median = statistics.median(evidence), statistics.median(scored)
    if median >= FOOTPRINT_SHARE * watched:
        return None
    return Failure(
        "decorative_dsl",
        f"The timed calls' DSL launches spanned {median:g} bytes of tensor arguments per call (median), against "
        f"{watched:g} on the calls the verifier watched: the timed calls launch the DSL kernels over less data than "
        "the calls the verifier checked. Run the same DSL work on every call.",
    )


def scored_dsl_time(
    scored_dsl_ms: Sequence[float],
    evidence_dsl_ms: Sequence[float],
    scored_launches: Sequence[int],
    evidence_launches: Sequence[int],
) -> Failure | None:
    """cpu: the scored calls' DSL time (the vault's clock around every counted launch, on every call) against the
    evidence calls' (DESIGN §5, "audits cannot be told apart"): a submission that launches its kernels with less
    work on the calls it guesses are scored, and makes the answer otherwise, gains at most ``1 - SCORED_DSL_SHARE``
    of the watched calls' DSL time and the slack of ``scored_dsl_floor``. The launches' own times, not the calls':
    the vault's work around an evidence call's launches (its copies, its signature) is outside them, so that the
    machine's load does not widen a gap the rule must allow (red team rt16 F1: the gate's cost the vault's clock
    missed grew with load, and honest one-launch cases failed the comparison of whole calls' CPU time, which this
    rule replaced on cpu)."""
    if not scored_dsl_ms or not evidence_dsl_ms:
        return None
    scored, watched = statistics.median(scored_dsl_ms), statistics.median(evidence_dsl_ms)
    if scored >= scored_dsl_floor(scored_dsl_ms, evidence_dsl_ms, scored_launches, evidence_launches):
        return None
    return Failure(
        "decorative_dsl",
        f"The timed calls spent {scored * 1e3:.1f} µs per call (median) inside DSL launches, the calls the verifier "
        f"watched {watched * 1e3:.1f} µs (at least {SCORED_DSL_SHARE:.0%} of it is required): run() does less DSL "
        "work when it is not watched. Run the same DSL work on every call.",
        measured=True,
    )


def scored_dsl_floor(
    scored_dsl_ms: Sequence[float],
    evidence_dsl_ms: Sequence[float],
    scored_launches: Sequence[int],
    evidence_launches: Sequence[int],
) -> float:
    """The least median DSL time the scored calls may spend (``scored_dsl_time``): ``SCORED_DSL_SHARE`` of the
    evidence calls' median, less each launch's cold start (``SCORED_COLD_START``)."""
    scored_count = statistics.median(scored_launches) if scored_launches else 0
    per_launch = statistics.median(scored_dsl_ms) / scored_count if scored_count else 0.0
    cold_start = min(SCORED_DSL_SLACK_MS, SCORED_COLD_START * per_launch)
    slack = shared_launches(scored_launches, evidence_launches) * cold_start
    return SCORED_DSL_SHARE * statistics.median(evidence_dsl_ms) - slack


@dataclass(frozen=True)
class HostTime:
    """cpu: the scored calls' host work, beside what the draws' eager operators took (``scored_host_time``), ms."""

    own_ms: float  # the scored calls' median CPU time less their DSL launches', less the null calls' median
    draws_eager_ms: float  # the draws' eager operators' own runs, median over the draws
    allowed_ms: float

    def as_dict(self) -> dict[str, float]:
        return {"own_ms": self.own_ms, "draws_eager_ms": self.draws_eager_ms, "allowed_ms": self.allowed_ms}


def scored_host_time(
    scored_cpu_ms: Sequence[float],
    scored_dsl_ms: Sequence[float],
    null_cpu_ms: Sequence[float],
    draws_eager_ms: Sequence[float],
    scored_launches: Sequence[int],
) -> tuple[HostTime | None, Failure | None]:
    """cpu: the scored calls' CPU time outside their DSL launches (the timer vault's process clock over each call,
    less the launches' own: every thread's host work inside the call), less the harness's (the null calls'), against
    the eager operators' own time on the correctness draws. The draws see every eager operator; the scored calls
    only their time: an answer made eagerly where no draw sees it, in whatever encoding a launch then undoes, is
    host work the draws did not do."""
    if not scored_cpu_ms or not null_cpu_ms or not draws_eager_ms or len(scored_cpu_ms) != len(scored_dsl_ms):
        return None, None
    harness = statistics.median(null_cpu_ms)
    spent = statistics.median(scored_cpu_ms) - harness  # the call's own cost, the harness's taken off
    own = statistics.median(c - d for c, d in zip(scored_cpu_ms, scored_dsl_ms, strict=True)) - harness
    eager = statistics.median(draws_eager_ms)
    launches = statistics.median(scored_launches) if scored_launches else 0.0
    allowed = HOST_EAGER_SLACK * eager + HOST_FLOOR_MS + HOST_LAUNCH_MS * launches + HOST_SHARE * spent
    found = HostTime(own, eager, allowed)
    if own <= allowed:
        return found, None
    return found, Failure(
        "decorative_dsl",
        f"The timed calls spent {own:.3g} ms per call (median, CPU) on host work outside their DSL launches; on the "
        f"correctness draws the eager operators took {eager:.3g} ms (at most {allowed:.3g} ms allowed): run() "
        "computes eagerly on the calls it guesses are not checked. Run the same work on every call.",
        measured=True,
    )


def shared_launches(scored_launches: Sequence[int], evidence_launches: Sequence[int]) -> float:
    """The launches both kinds of call make (the fewer of their medians), which alone buy the scored-time rules'
    slack a launch: launches made only where watched buy none (red team rt21 F1: 700 one-float launches on two evidence
    calls in three took the cpu floor 4.6 ms below zero while the scored calls made 2)."""
    if not scored_launches or not evidence_launches:
        return 0.0
    return float(min(statistics.median(scored_launches), statistics.median(evidence_launches)))


def scored_time_floor(
    evidence_ms: Sequence[float], launches: float, null_ms: Sequence[float], scored_calls: int
) -> float:
    """cuda: the least median the scored calls may cost (``scored_time``): the harness's cost (the null calls'
    median) and the evidence calls' own cost beyond it, less its noise, the watching's cost per launch (``launches``:
    ``shared_launches``) and the harness's noise in both medians (``scored_calls`` of them against the evidence
    calls)."""
    watched = statistics.median(evidence_ms)
    harness = statistics.median(null_ms) if null_ms else 0.0
    spread = statistics.median(abs(x - harness) for x in null_ms) if null_ms else 0.0
    noise = HARNESS_SIGMAS * 1.85 * spread * math.sqrt(1 / len(evidence_ms) + 1 / max(scored_calls, 1))
    own = max(watched - harness, 0.0)
    return harness + own * (1 - EVIDENCE_NOISE) - launches * EVIDENCE_LAUNCH_COST_MS - noise


def scored_time(
    scored_ms: Sequence[float], evidence_ms: Sequence[float], launches: float, null_ms: Sequence[float]
) -> Failure | None:
    """cuda: the scored timed calls' reported times cost no less than the evidence calls' beyond what the evidence
    itself costs (``evidence_ms``: less the vault's measured time; ``null_ms``: the null calls') (DESIGN §5, "audits
    cannot be told apart"): a submission that does its DSL work only on the calls it guesses are evidence, and
    something faster otherwise, gains at most ``EVIDENCE_NOISE`` of the evidence calls' own time,
    ``EVIDENCE_LAUNCH_COST_MS`` a launch and the harness's noise."""
    if not scored_ms or not evidence_ms:
        return None
    scored, watched = statistics.median(scored_ms), statistics.median(evidence_ms)
    allowed = scored_time_floor(evidence_ms, launches, null_ms, len(scored_ms))
    if scored >= allowed:
        return None
    return Failure(
        "decorative_dsl",
        f"The timed calls cost {fmt(scored)} ms (median), the calls the verifier watched {fmt(watched)} ms: more "
        "than the watching costs (at most "
        f"{fmt(watched - allowed)} ms): run() does other work when it is watched. Run the same DSL work on every call.",
        measured=True,
    )
