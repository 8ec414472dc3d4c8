"""The phases of a verification, one to one with DESIGN §5: static scan → worker → correctness →
bypass/coverage → timing → cross-check → verdict. Each returns the ``Failure`` it finds, or None."""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import replace
from typing import Any

import torch

from mkbsim.verifier import _blocks, _coverage, _decode, _eagerwork, _plankind, _threads
from mkbsim.verifier._arena import Arena
from mkbsim.verifier._blocks import Block, BlockCall
from mkbsim.verifier._blocks import total_check as block_total_check
from mkbsim.verifier._compare import compare
from mkbsim.verifier._control import KEPT_EVIDENCE, MAX_KEPT, STALE_DRAW, TWIN_CALLS, TWIN_DRAW
from mkbsim.verifier._judge import (
    Failure,
    call_error,
    error_text,
    fmt,
    mutation,
    scored_dsl_floor,
    scored_dsl_time,
    scored_footprint,
    scored_host_time,
    scored_launches,
    scored_time,
    scored_time_floor,
    shared_launches,
    structure,
    tampering,
    values,
    worker_failed,
)
from mkbsim.verifier._noprocess import filters, program
from mkbsim.verifier._process import WorkerFailed
from mkbsim.verifier._provenance import SAMPLES
from mkbsim.verifier._static import scan_source
from mkbsim.verifier._trusted import (
    NULL_OTHERS_MS,
    Trusted,
    beside_check,
    calibration_check,
    idle_check,
    idle_figures,
    null_others,
    pending_check,
)
from mkbsim.verifier._trusted import cross_check as trusted_cross_check
from mkbsim.verifier._verification import Call, Draw, Verification, rng

#: Unscored calls (on a draw of their own) right before each correctness draw, in the same block.
DRAW_WARMUP = 2
#: On cuda, device work still running this long after the timed stream finished is charged to the call.
PENDING_CHARGE_MS = 0.1
#: Unscored timed-protocol calls, interleaved with the scored ones, on which the gate times the DSL launches
#: and lists their signatures (DESIGN §5, "audits cannot be told apart"): the two rules judged on them need
#: a majority (dsl time: the median) and 75% of the calls (kernels), so one odd call of an honest kernel
#: cannot fail them, and an attacker behaving only when it guesses a call is scored has 10 chances to guess
#: wrong once (verifier README, "Evidence calls"); 10 calls add a fifth to the 50 scored ones.
EVIDENCE_CALLS = 10
#: The scored calls re-checked are drawn after all of them ran (their outputs kept, the choice never sent to
#: the worker), as many as it takes for a submission returning wrong outputs on this share of them to escape
#: with at most this probability (18 of 50). The median moves only when half the calls do less work, so a
#: cheat on fewer gains nothing; the protocol's own count is the floor.
RECHECK_CHEAT_SHARE = 0.25
RECHECK_MISS = 1e-3
#: Rounds a timing verdict may take: one that finds a timing rule broken, one that confirms it (verifier README,
#: "Timing verdicts are confirmed"): a loaded machine's false alarm costs a round, not a wrong verdict.
TIMING_ROUNDS = 2


def static_scan(v: Verification) -> Failure | None:
    scan = scan_source(v.source, v.dsl, str(v.path))
    if scan.syntax_error:
        return Failure("compile_error", f"The file does not parse: {scan.syntax_error}.")
    v.inline += [f.text() for f in scan.of("inline_cuda")]
    v.details["static"] = {k: [f.text() for f in scan.of(k)] for k in ("forbidden", "timing_tamper", "inline_cuda")}
    if not v.enforce_static:
        return None
    for kind, code, intro in (("timing_tamper", "timing_tamper", "Timing functions must not be replaced"),
                              ("forbidden", "forbidden_api", "Forbidden APIs found by the static scan")):  # fmt: skip
        found = scan.of(kind)  # type: ignore[arg-type]
        if found:
            v.report.forbidden = [f.text() for f in found]
            return Failure(code, f"{intro}:\n" + "\n".join(f"- {f.text()}" for f in found))
    return None


def start_worker(v: Verification) -> Failure | None:
    t0 = time.perf_counter()
    v.report.env.update(v.session.zygote().confinement())  # started once per session; its cost is its own phase
    v.timed("zygote_start_s", t0)
    t0 = time.perf_counter()
    numels = v.shape.numels()
    v.positions = [torch.tensor(sorted(rng.sample(range(n), min(n, SAMPLES))), dtype=torch.int64) for n in numels]
    extra = {"sample_positions": [p.tolist() for p in v.positions], "output_numels": numels, "inplace": v.shape.inplace}
    try:
        v.worker, v.control, hello = v.session.start_worker("candidate", v.path, v.dsl, v.protocol, extra)
    except WorkerFailed as exc:
        return worker_failed(exc, "while importing the file", v.details)
    v.timed("spawn_import_s", t0)
    v.details["import_s"] = hello.get("import_s")
    failure = (
        process_census(v) or v.absorb(hello, "while importing the file") or tampering(hello, "while importing the file")
        or process_filter_held(v, hello)
    )  # fmt: skip
    if failure is not None or hello.get("ok"):
        return failure
    error = hello.get("error") or {}
    if error.get("memory"):
        return Failure("memory", f"The import ran out of memory: {error_text(error)}")
    tail = v.worker.output_tail() if v.worker else ""
    more = f"\n  output:\n{tail}" if tail.strip() else ""
    return Failure("compile_error", f"Importing the file failed: {error_text(error)}{more}")


def process_census(v: Verification) -> Failure | None:
    """Once its file is loaded a candidate's worker starts no process (``_noprocess``): a process of its still
    running then (the zygote's ``strays``: its descendants and the orphans it inherited, in the sandbox's PID
    namespace) was started before the filter and would run on unaudited (red team rt11 F2). Killed, and refused as
    the forbidden API it is (the per-answer check would call it background work)."""
    assert v.worker is not None
    found = v.worker.strays()
    if not found:
        return None
    v.report.forbidden += found
    return Failure("forbidden_api", f"Processes were running once the file was loaded ({'; '.join(found[:3])}): a "
                   "submission may start no process (subprocesses are forbidden).")  # fmt: skip


def process_filter_held(v: Verification, hello: dict[str, Any]) -> Failure | None:
    """The worker's process filter is in place once its file loaded: the kernel's count of its seccomp filters grew
    since it was forked (where this machine has a filter and the kernel counts them; the worker's answer is only
    quoted). ``env.process_filter`` says which held."""
    assert v.worker is not None
    if not hello.get("ok"):
        return None
    before, now = v.worker.filters_at_spawn, filters(v.worker.pid)
    why = str(hello.get("process_filter") or "")
    if program() is None or before is None or now is None:
        v.report.env["process_filter"] = (
            f"none: processes are refused by the guards' audit rules only ({why})" if why else
            "seccomp, unchecked: the worker says it installed the filter; this kernel counts no filters"
        )  # fmt: skip
        return None
    if now <= before:
        return Failure("harness_tamper", f"The worker's process filter was not installed ({why or 'no reason given'}).")
    v.report.env["process_filter"] = "seccomp: no process starts once the file is loaded"
    return None


def correctness(v: Verification) -> Failure | None:
    """5 float64-anchored draws, and one more with every DSL launch suppressed (judged by ``coverage``); each in
    a block of its own after ``DRAW_WARMUP`` unscored calls, so that its launches run on a host as warm as the
    timed calls' (its DSL time is what the evidence calls are held to)."""
    t0 = time.perf_counter()
    p, s = v.protocol, v.shape
    later = [i for i in range(2, p.correctness_draws + 1)] + [0] * p.suppressed_draws
    rng.shuffle(later)
    anchors: list[float] = []
    for number in [1, *later]:  # the first draw is never the suppressed one (nor is the first call: a warm-up)
        kinds = ["warmup"] * DRAW_WARMUP + ["draw" if number else "suppressed"]
        # the warm-ups in a block of their own, answered before the draw's inputs reach the worker: an unaudited
        # call never reaches an audited draw's inputs (verifier README, "Blocks"); both made now, sent back to back
        warm, block = (Block(part, s.draw, lambda: rng.getrandbits(63), s.out_specs, v.session.device,
                             v.session.staged_arenas, distinct=False) for part in (kinds[:-1], kinds[-1:]))  # fmt: skip
        call = block.calls[-1]
        refs: list[Any] = []

        def anchor(inputs: list[Any] = call.inputs, refs: list[Any] = refs) -> None:  # while the worker runs
            ta = time.perf_counter()
            refs.extend(s.refs(inputs))
            anchors.append(time.perf_counter() - ta)

        where = f"in correctness draw {number} of {p.correctness_draws}" if number else "with DSL launches suppressed"
        answers = v.call_block(warm, [where] * DRAW_WARMUP)
        if not isinstance(answers, Failure) and len(answers) == DRAW_WARMUP:
            answered = time.perf_counter()
            drawn = v.call_block(block, [where], meanwhile=anchor)
            answers = drawn if isinstance(drawn, Failure) else answers + drawn
            if not isinstance(drawn, Failure) and drawn:  # the host's pause between the warm-ups and the draw
                v.details.setdefault("draw_gap_ms", []).append(round((drawn[0].page["start_t"] - answered) * 1e3, 3))
        if isinstance(answers, Failure):
            return answers
        if len(answers) < len(kinds):  # a warm-up's answer ended the block: judged as the draw's
            last = answers[-1].reply if answers else {}
            failure = call_error(last, where, first=number == 1) if not last.get("ok") else _structure(v, last, where)
            return failure or Failure(
                "harness_tamper", f"The worker answered {len(answers)} of {len(kinds)} calls {where}."
            )
        answer, arena = answers[-1], block.arena(call)
        draw = Draw(number, call.inputs, refs, answer.reply, answer.page)
        v.draws.append(draw)
        if number != 0:
            failure = _checked(v, draw, arena, where, first=number == 1)
            if failure is not None:
                return failure
        elif answer.reply.get("ok") and _structure(v, answer.reply, where) is None:
            draw.outputs = _delivered(v, arena, answer.reply)
        if answer.reply.get("ok") and not answer.page["launches"]:
            why = [str(r[1]) for r in answer.page.get("records") or () if r[0] == "uncounted"]  # an argument's type
            return Failure(
                "not_dsl",
                f"run() launched no {v.dsl} kernel {where}; a submission must run its work in the DSL."
                + "".join(f" ({text})" for text in why[:1]),
            )
    v.report.correct = True
    v.phases["anchors_s"] = sum(anchors)
    v.timed("correctness_s", t0)
    return None


def _structure(v: Verification, reply: dict[str, Any], where: str) -> Failure | None:
    s = v.shape
    return structure(reply, where, s.labels, s.out_specs, v.session.device.type, s.input_names)


def _delivered(v: Verification, arena: Arena, reply: dict[str, Any]) -> list[Any]:
    """The submission's outputs as delivered (slots, scalars), then the in-place inputs."""
    items = (reply.get("structure") or {}).get("items") or []
    views = iter(arena.out_views)
    outs = [
        next(views).clone() if spec is not None else fact.get("value")
        for fact, spec in zip(items, v.shape.out_specs, strict=True)
    ]
    return outs + [arena.args[i].clone() for i in v.shape.inplace]


def _checked(v: Verification, draw: Draw, arena: Arena, where: str, first: bool,
             into: list[Any] | None = None) -> Failure | None:  # fmt: skip
    """A draw's answer judged (structure, mutation, values); its outputs' comparison kept in ``into`` (default: the
    report's ``draws``)."""
    reply = draw.reply
    if not reply.get("ok"):
        return call_error(reply, where, first=first)
    failure = _structure(v, reply, where)
    failure = failure or _background(reply, where)
    failure = failure or mutation(arena, draw.inputs, where, v.shape.input_names, v.shape.inplace)
    if failure is not None:
        return failure
    draw.outputs = _delivered(v, arena, reply)
    checks = [compare(out, ref) for out, ref in zip(draw.outputs, draw.refs, strict=True)]
    (v.details["draws"] if into is None else into).append(
        {
            "draw": draw.number,
            "launches": draw.page["launches"],
            "ms": draw.page["ms"],
            "outputs": [c.as_dict() for c in checks],
        }
    )
    failure = values(checks, where, v.protocol.allowance_factor)
    erased = sum(record[1] for record in draw.page.get("records") or () if record[0] == "memory")
    if failure is not None and erased:  # the likeliest cause, named (red team rt18 F2: eager work on a pool thread)
        cause = (
            f" On this draw {erased} bytes that no recorded writer left were erased before they were read (NaN "
            "where floating, else 0): memory written by what the audit does not see, such as torch operators run on "
            'another thread, numpy, or raw pointers (verifier README, "Memory no recorded writer left").'
        )
        failure = Failure(failure.code, failure.feedback + cause)
    return failure


def _background(reply: dict[str, Any], where: str) -> Failure | None:
    found = reply.get("background") or []
    if found:
        return Failure(
            "background_work",
            f"Work was still running after run() returned {where} ({'; '.join(found)}); "
            "finish all work before returning.",
        )
    return None


def coverage(v: Verification) -> Failure | None:
    """The bypass test as coverage (``_coverage``): suppression, then provenance."""
    normal = [d for d in v.draws if not d.suppressed]
    for sup in (d for d in v.draws if d.suppressed):
        if sup.outputs is None:
            what = (
                error_text(sup.reply.get("error") or {})
                if not sup.reply.get("ok")
                else "outputs not of the declared form"
            )
            v.report.bypass_ok = False
            return Failure(
                "decorative_dsl",
                f"With DSL launches suppressed, run() did not return its outputs ({what}). A call must return "
                "whatever its kernels computed: a failure there says nothing about whether the DSL does the work.",
            )
        masks = _masks(v, sup, normal[0])
        found = _coverage.suppressed_shares(sup.outputs, sup.refs, masks)
        for k, d in enumerate(normal):
            failure = _provenance(v, d, normal[(k + 1) % len(normal)], found)
            if failure is not None:
                return failure
        verdict = _coverage.judge(found, len(v.shape.inplace))
        v.details.setdefault("bypass", []).append(
            {
                "launches": sup.page["launches"],
                "outputs": [c.as_dict() for c in verdict.outputs],
                "dsl_share": verdict.total_share,
                "outputs_share": verdict.outputs_share,
            }
        )
        if verdict.failure is not None:
            v.report.bypass_ok = False
            return Failure("decorative_dsl", verdict.failure + _decode.explain(v.details.get("decoded", [])))
    v.details["dark_cpu_us"] = [d.reply.get("audit_dark_us") for d in normal]
    failure = _audited_threads(normal) or _eager_work(v, normal)
    if failure is not None:
        v.report.bypass_ok = False
        return failure
    v.report.bypass_ok = True
    if v.plan is not None and v.plan.partial and v.protocol.require_full_plan:  # the bypass test passed: a real plan
        return Failure("partial_plan", _plankind.require_full(v.plan))
    return None


def _audited_threads(normal: list[Draw]) -> Failure | None:
    """Another thread at work during a checked draw: one run() started, or one that existed before and took CPU
    (woken by run(): ``_threads.moved``). The audit's dispatch mode follows the calling thread only."""
    why = "the audit of which code computes the outputs follows the calling thread only, so the DSL's share of the "
    fix = "Do the call's work in the thread that calls run()."
    for d in normal:
        if d.reply.get("audit_threads"):
            return Failure(
                "decorative_dsl",
                f"run() started {d.reply['audit_threads']} thread(s) in correctness draw {d.number}: {why}work cannot "
                f"be shown. {fix}",
            )
        busy = d.reply.get("audit_busy")
        if busy:
            return Failure(
                "decorative_dsl",
                f"another thread worked during correctness draw {d.number} ({'; '.join(busy[:3])}): {why}work "
                f"cannot be shown. {fix} (a thread may compile kernels meanwhile: torch operators are what counts)",
            )
        dark_us = d.reply.get("audit_dark_us")
        if isinstance(dark_us, int) and dark_us > _threads.DARK_CPU_US:
            return Failure(
                "decorative_dsl",
                f"threads that started during correctness draw {d.number} took {dark_us} us of CPU (the process's CPU "
                f"that the threads alive before and after the call do not account for: a thread native code started, "
                f"or one that ended before run() returned): {why}work cannot be shown. {fix}",
            )
    return None


def _eager_work(v: Verification, normal: list[Draw]) -> Failure | None:
    """The submission's eager work against the reference's (``_eagerwork``), on one checked draw chosen at random:
    the reference runs once more under the recorder (0.3 s on p44 at SMOKE), and a call cannot tell which draw."""
    d = rng.choice(normal)
    measured = _eager_measure(v, d, f"correctness draw {d.number}")
    if isinstance(measured, Failure):
        return measured
    work, reference, found = measured
    ops, fed = (next((r[1] for r in d.page["records"] or () if r[0] == k), None) for k in ("eager_ops", "fed_ops"))
    if fed is None:
        return Failure("harness_tamper", f"The worker's records of correctness draw {d.number} are missing.")
    # the share counts what reached the answer only through Python; the price that fails a plan does not
    v.plan = plan = _plankind.plan_kind(work, reference, _eagerwork.work_of([*(ops or ()), *fed]) if fed else None)
    v.details["eager_work"] = {**found.as_dict(), "plan": plan.as_dict()}
    v.report.plan, v.report.plan_eager_share = plan.kind, plan.eager_share
    return Failure("decorative_dsl", _eagerwork.explain(found)) if found.covers else None


def _eager_measure(v: Verification, d: Draw, where: str) -> tuple[Any, Any, Any] | Failure:
    """Draw ``d``'s eager work, the reference's on its inputs, and their comparison (``_eagerwork.compare``)."""
    ops = next((r[1] for r in d.page["records"] or () if r[0] == "eager_ops"), None)
    if ops is None:
        return Failure("harness_tamper", f"The worker's eager-operator records of {where} are missing.")
    try:
        work = _eagerwork.work_of(ops)
    except IndexError:  # an operator with fewer operands than its kind has: not what the vault records
        return Failure("harness_tamper", f"The worker's eager-operator records of {where} are not the harness's.")
    # the draw's useful FLOPs (its own sequence lengths: a length's expectation made p03's eager attention short of
    # a pass on some draws): what padding the reference computes is taken out
    cost = v.shape.problem.input_cost(v.shape.axes, d.inputs)
    reference = _eagerwork.reference_work(
        v.shape.problem.reference, d.inputs, cost.total_flops, v.shape.inplace, cost.floor_flops
    )
    return work, reference, _eagerwork.compare(d.number, work, reference)


def _provenance(v: Verification, d: Draw, other: Draw, found: list[_coverage.OutputCoverage]) -> Failure | None:
    records = d.page.get("records")
    if not isinstance(records, list):
        return Failure("harness_tamper", f"The worker's provenance records of correctness draw {d.number} are missing.")
    faults = [str(record[1]) for record in records if record[0] == "fault"]
    if faults:
        # not infra_error: campaigns retry those and do not count them, so a submission able to upset the audit
        # (as one did with an unsigned dtype the sentinel fill refused) would get unlimited uncounted tries
        return Failure(
            "decorative_dsl",
            f"The verifier could not audit which code produced the outputs in correctness draw {d.number} "
            f"({faults[0]}), so the DSL's share of the work cannot be shown and the bypass test fails.",
        )
    assert d.outputs is not None
    for record in records:  # the outputs the vault saw returned are the ones delivered to the verifier
        if record[0] == "result" and 0 <= record[2] < len(d.outputs) and isinstance(d.outputs[record[2]], torch.Tensor):
            delivered = d.outputs[record[2]].reshape(-1)[v.positions[record[2]]].to(torch.float64).cpu()
            seen = torch.tensor(record[3], dtype=torch.float64)
            if not bool(((delivered == seen) | (delivered.isnan() & seen.isnan())).all()):
                return Failure(
                    "harness_tamper",
                    f"The outputs delivered in correctness draw {d.number} are not the ones run() returned.",
                )
    _coverage.apply_provenance(found, records, d.refs, _masks(v, d, other), v.positions, f"correctness draw {d.number}")
    v.details.setdefault("decoded", []).extend([d.number, *record[1:]] for record in records if record[0] == "decoded")
    # per draw: bytes erased before a read (no recorded writer left them), the census's storages, bytes and ms
    v.details.setdefault("memory", []).extend([d.number, *record[1:]] for record in records if record[0] == "memory")
    return None


def _masks(v: Verification, d: Draw, other: Draw) -> list[torch.Tensor]:
    """Each output's input-dependent elements in draw ``d`` (against ``other``; in-place: what changed)."""
    s = v.shape
    before = [None] * s.n_outputs + [d.inputs[j] for j in s.inplace]
    return [_coverage.informative_mask(ref, oth, b) for ref, oth, b in zip(d.refs, other.refs, before, strict=True)]


def timing(v: Verification) -> Failure | None:
    """Warmup and timed calls on fresh inputs, null calls and unscored evidence calls interleaved (the
    evidence and null flags go to the control page only), run back to back in blocks (``_blocks``); a secret
    random subset of the scored calls re-checked from the outputs each block kept, once it answered."""
    t0 = time.perf_counter()
    p, s = v.protocol, v.shape
    scored = sorted(
        ["timed"] * p.timed_calls + ["evidence"] * EVIDENCE_CALLS + ["null"] * p.null_calls, key=lambda _: rng.random()
    )
    # drawn here, never sent to the worker: a block's outputs are read after it answered, so nothing
    # the submission sees during a call tells it that this call will be re-checked; evidence calls alike
    checked = [i for i, kind in enumerate(scored) if kind != "null"]
    recheck = set(rng.sample(checked, rechecked_count(len(checked), p.rechecked_timed_calls)))
    v.details["timing_rechecks"] = []
    anchors_before = v.phases.get("anchors_s", 0.0)
    kept = ("warmup_ms", "timed_ms", "host_ms", "pending_ms", "launches_per_call", "footprints", "dsl_ms", "null_ms",
            "cpu_ms", "null_cpu_ms")  # fmt: skip
    t = v.timing = {k: [] for k in kept}
    t["evidence"] = {k: [] for k in ("ms", "launches", "footprints", "dsl_ms", "signatures", "fixed_changed",
                                     "trusted", "work", "seeds")}  # fmt: skip
    # the evidence calls (by their order) whose launches the worker keeps for the twin draws, and their seeds
    twin_ordinals = rng.sample(range(EVIDENCE_CALLS), min(TWIN_CALLS, EVIDENCE_CALLS, MAX_KEPT))
    t["evidence"]["kept"] = [None] * len(twin_ordinals)
    ordinal = 0
    t["trusted"], t["null_trusted"], t["null_pending"] = [], [], []
    distinct = p.unique_input_buffers
    blocks = _blocks.plan_for(s, v.session.device, v.session.limits.memory_bytes, p.warmup_calls, scored, distinct)
    v.details["timing_blocks"] = [len(kinds) for kinds in blocks]
    t["blocks"] = []
    k = unique = position = 0
    for planned in blocks:
        for kinds in _blocks.parts(planned):
            twin = []
            for kind in kinds:
                kept_now = kind == "evidence" and ordinal in twin_ordinals
                twin.append(KEPT_EVIDENCE + twin_ordinals.index(ordinal) if kept_now else 0)
                ordinal += kind == "evidence"
            block = Block(kinds, s.draw, lambda: rng.getrandbits(63), s.out_specs, v.session.device,
                          v.session.staged_arenas, distinct=distinct, twin=twin)  # fmt: skip
            # an evidence call is named as a timed call: the feedback does not say which calls were evidence
            wheres, counted = [], k
            for kind in kinds:
                wheres.append(f"in timed call {counted + 1} of {p.timed_calls}" if kind in ("timed", "evidence")
                              else f"in a {kind} call")  # fmt: skip
                counted += kind == "timed"
            answers = v.call_block(block, wheres, p.cache_flush)
            if isinstance(answers, Failure):
                return answers
            for call, answer, where in zip(block.calls, answers, wheres, strict=False):
                checked_now = call.kind != "warmup" and position in recheck
                position += call.kind != "warmup"
                failure, k = _timed_call(v, block, call, answer, where, k, checked_now)
                if failure is not None:
                    return failure
            if len(answers) < len(block.calls):
                return Failure("harness_tamper", f"The worker answered {len(answers)} of a block's "
                               f"{len(block.calls)} timed calls, though none of its answers failed.")  # fmt: skip
            for call, code in zip(block.calls, block.twin, strict=True):
                if code >= KEPT_EVIDENCE:
                    t["evidence"]["kept"][code - KEPT_EVIDENCE] = call.seed
            if kinds[0] != "warmup":  # the scored block, judged whole (``_blocks.total_check``)
                t["blocks"].append([(c.kind, _unwatched(c)) for c in block.calls])
            unique += len(block.memory.arenas)
    t["unique"] = unique if distinct else None
    v.timed("timing_s", t0)
    v.phases["timing_s"] -= v.phases.get("anchors_s", 0.0) - anchors_before  # re-checks count as anchors
    return None


def _timed_call(v: Verification, block: Block, call: BlockCall, answer: Call, where: str, k: int,
                recheck: bool) -> tuple[Failure | None, int]:  # fmt: skip
    """One answered call of a block, judged and recorded (``recheck``: its outputs compared with the
    reference's too); (its failure, the scored calls counted so far)."""
    t, s = v.timing, v.shape
    page, reply = answer.page, answer.reply
    if call.kind == "null":
        t["null_ms"].append(page["ms"])
        t["null_cpu_ms"].append(page["cpu_ms"])
        t["null_trusted"].append(answer.trusted)
        t["null_pending"].append(page["pending_ms"])
        return None, k
    if not reply.get("ok"):
        return call_error(reply, where, first=False), k
    failure = _structure(v, reply, where) or _background(reply, where)
    if failure is None and not page["launches"]:
        failure = Failure(
            "not_dsl", f"run() launched no {v.dsl} kernel {where}; every call must run its work in the DSL."
        )
    if failure is not None:
        return failure, k
    if call.kind == "warmup":
        t["warmup_ms"].append(page["ms"])
        return None, k
    # device work that ran past the call is charged to it: hiding work on a few calls then gains nothing
    pending = page["pending_ms"]
    ms = page["ms"] + (pending if pending > PENDING_CHARGE_MS else 0.0)
    arena = block.arena(call)
    failure = mutation(arena, call.inputs, where, s.input_names, s.inplace)
    if failure is None and recheck:
        failure = _rechecked(v, where, call.seed, _delivered(v, arena, reply))
    if call.kind == "evidence":
        for key, value in (("ms", ms), ("launches", page["launches"]), ("footprints", page["footprint"]),
                           ("dsl_ms", page["dsl_ms"]),
                           ("signatures", page["signatures"]), ("fixed_changed", page["fixed_changed"]),
                           ("trusted", answer.trusted),
                           ("work", page["work"]), ("seeds", call.seed)):  # fmt: skip
            t["evidence"][key].append(value)
        return failure, k
    t["timed_ms"].append(ms)
    t["host_ms"].append(page["host_ms"])
    # the harness's own time between this call's timer and the next one's (its trusted measure is start to start)
    v.details.setdefault("harness_gap_ms", []).append(answer.trusted.round_trip_ms - page["host_ms"])
    t["pending_ms"].append(pending)
    t["launches_per_call"].append(page["launches"])
    t["footprints"].append(page["footprint"])
    t["dsl_ms"].append(page["dsl_ms"])  # cpu: the vault times every call's launches (``_judge.scored_dsl_time``)
    t["cpu_ms"].append(page["cpu_ms"])  # cpu: the host work outside them (``_judge.scored_host_time``)
    t["trusted"].append(answer.trusted)
    return failure, k + 1


def _unwatched(call: BlockCall) -> Trusted:
    """A scored call's trusted measure as the block total judges it: an evidence call's less what the gate spent
    measuring its work (the vault's clock over its steps: cuda the host clock, its device copies included, and its
    reading of the outputs after the timer stopped; cpu the CPU time of the thread running them, which the call's
    host clock and the process's CPU clock each hold at least once: ``_provenance``). The gate's copies scale with
    the launch's arguments and vary by milliseconds: ~5 ms a call for the 600 MB paged cache of p01 on the H200, 50-85
    ms (±17-108 ms) for p26's 32 MB block tables at PRODUCTION on cpu (red team rt12 F1); left to the total, the
    evidence calls of one block outweighed its allowance. What the submission does meanwhile in threads of its own
    stays the call's (a process-wide clock took it off with the gate's, until session 11)."""
    assert call.trusted is not None and call.page is not None
    work = call.page.get("work") if call.kind == "evidence" else None
    if not work:
        return call.trusted
    spent = float(work["ms"]) + float(work["after_ms"])
    cpu = call.trusted.cpu_ms
    # (on cuda the block total reads the host clock only: the CPU clock's figure is not judged there)
    return replace(call.trusted, round_trip_ms=max(call.trusted.round_trip_ms - spent, 0.0),
                   cpu_ms=max(cpu - spent, 0.0) if cpu is not None else None)  # fmt: skip


def rechecked_count(timed_calls: int, least: int) -> int:
    """The fewest scored calls to re-check (at least ``least``) so that wrong outputs on a share
    ``RECHECK_CHEAT_SHARE`` of them are missed with probability at most ``RECHECK_MISS`` (drawn without
    replacement: C(good, n) / C(calls, n))."""
    good = timed_calls - math.ceil(RECHECK_CHEAT_SHARE * timed_calls)
    n = min(least, timed_calls)
    while n < timed_calls and math.comb(good, n) / math.comb(timed_calls, n) > RECHECK_MISS:
        n += 1
    return n


def _rechecked(v: Verification, where: str, seed: int, outs: list[Any]) -> Failure | None:
    """A scored or evidence call's delivered outputs (``where``: named as a timed call either way) against
    the reference on its inputs, drawn again from its seed."""
    ta = time.perf_counter()
    checks = [compare(out, ref) for out, ref in zip(outs, v.shape.refs(v.shape.draw(seed)), strict=True)]
    v.details["timing_rechecks"].append({"call": where, "outputs": [c.as_dict() for c in checks]})
    v.phases["anchors_s"] = v.phases.get("anchors_s", 0.0) + time.perf_counter() - ta
    return values(checks, f"{where} (re-checked)", v.protocol.allowance_factor)


def timing_rounds(v: Verification) -> Failure | None:
    """Timing, then the cross-check, confirmed (DESIGN §5): a failure of a rule that compares times
    (``Failure.measured``) stands only if a second, independent round (fresh seeds, plan order, re-checked
    calls and evidence calls) fails a timing rule too; otherwise the second round's measures are the result.
    Deterministic rules (launch counts, signatures, re-checked outputs, tampering) end it at once. Each
    round's outcome and medians are in ``details["timing_rounds"]``."""
    rounds: list[dict[str, Any]] = []
    v.details["timing_rounds"] = rounds
    failure: Failure | None = None
    for _ in range(TIMING_ROUNDS):
        for key in _ROUND_DETAILS:  # what a round's cross-check writes: none left over from the round before
            v.details.pop(key, None)
        failure = timing(v) or cross_check(v)
        rounds.append(_round_summary(v, failure))
        if failure is None or not failure.measured:
            return failure
    return failure


_ROUND_DETAILS = (
    "timed_kernels", "dsl_time", "evidence_calls", "clock_check", "harness_gap_ms", "block_totals", "scored_time",
    "idle_cpu", "host_time",
)  # fmt: skip


def _round_summary(v: Verification, failure: Failure | None) -> dict[str, Any]:
    """One timing round as the report keeps it: its failure, and the medians its rules compared."""
    t = v.timing

    def median(xs: list[Any]) -> float | None:
        return float(statistics.median(xs)) if xs else None

    evidence, nulls = t.get("evidence") or {}, t.get("null_trusted") or []
    return {
        "failure": failure.code if failure else None,
        "feedback": failure.feedback if failure else None,
        "median_ms": median(t.get("timed_ms") or []),
        "evidence_median_ms": median(evidence.get("ms") or []),
        "cpu_median_ms": median([c.cpu_ms for c in t.get("trusted") or [] if c.cpu_ms is not None]),
        "evidence_cpu_median_ms": median([c.cpu_ms for c in evidence.get("trusted") or [] if c.cpu_ms is not None]),
        "dsl_median_ms": median([ms for ms in t.get("dsl_ms") or [] if ms is not None]),
        "evidence_dsl_median_ms": median([ms for ms in evidence.get("dsl_ms") or [] if ms is not None]),
        "null_cpu_over_ms": median(  # the harness's own CPU around a call, as the null calls show it
            [c.cpu_ms - r for c, r in zip(nulls, t.get("null_ms") or [], strict=True) if c.cpu_ms is not None]
        ),
    }


def cross_check(v: Verification) -> Failure | None:
    """The reported times against the verifier's own measures."""
    t = v.timing
    device_type = v.session.device.type
    runtime = statistics.median(t["timed_ms"])
    # work off the timed stream or between calls first: it also leaves the trusted clock unexplained (on cuda the CPU
    # between calls is judged in ``verdict``, against the eager reference's worker)
    if device_type == "cuda":
        busy = pending_check(t["pending_ms"], t["null_pending"], runtime)
    else:
        v.details["idle_cpu"] = idle_figures(t["trusted"], runtime, device_type)
        busy = idle_check(t["trusted"], runtime, device_type)
    if busy:
        return Failure(
            "background_work", f"Work ran outside the timed calls: {busy}; finish all work inside run().", measured=True
        )
    v.details["block_totals"], concentrated = block_total_check(t["blocks"], device_type)
    if concentrated:
        return Failure("timing_tamper", f"The timed calls' times are not their own: {concentrated}.", measured=True)
    failure = _timed_as_audited(v)
    if failure is not None:
        return failure
    if device_type == "cpu":  # the null calls slowed by threads beside the calling one (their figure: every round's)
        v.details["calibration"] = {"null_others_ms": null_others(t["null_trusted"]), "limit_ms": NULL_OTHERS_MS}
        slowed = beside_check(t["null_trusted"])
        if slowed:
            return Failure(
                "timing_tamper", f"The reported call times disagree with the verifier's clock: {slowed}.", measured=True
            )
    check = trusted_cross_check(t["timed_ms"], t["trusted"], t["null_ms"], t["null_trusted"], device_type)
    v.details["clock_check"] = check
    if check["tampered"]:
        return Failure(
            "timing_tamper",
            f"The reported call times disagree with the verifier's clock: {check['tampered']}.",
            measured="impossible" not in check,
        )
    return None


def speed_of_light(v: Verification) -> Failure | None:
    """The last timing round's median against the speed of light (DESIGN §5). The peaks are measured with no
    process of the candidate's alive (a helper it left could load the machine meanwhile): closing the worker
    kills whatever it started, so this runs after the timing rounds, never between them. Not retried as a
    round: a median that beats the speed of light has the peaks measured again first (``_devices``)."""
    v.close_worker()
    runtime = statistics.median(v.timing["timed_ms"])
    t0 = time.perf_counter()
    sol = v.session.speed_of_light(v.problem, v.shape.axes, runtime)  # measured peaks: again where beaten
    v.timed("sol_s", t0)
    sol["fraction"] = sol["sol_ms"] / runtime if runtime > 0 else math.inf
    v.details["sol"] = sol
    if runtime < sol["sol_ms"]:
        return Failure(
            "timing_tamper",
            f"The reported median {fmt(runtime)} ms is below this problem's speed of light on {sol['device_profile']} "
            f"({fmt(sol['sol_ms'])} ms: {sol['bytes']} bytes at peak bandwidth, or its FLOPs at peak rate): no kernel "
            "runs that fast, so the time was not measured from the work.",
        )
    return None


def _timed_as_audited(v: Verification) -> Failure | None:
    """The coverage the correctness draws measured holds on the timed calls: the evidence calls launch the
    same kernels on the same shapes (``_coverage``, deterministic), for about as long (measured), and the
    scored calls launch as many kernels as the evidence calls and take about as long, less the evidence's
    own cost (``_judge``: the count deterministic, the time measured)."""
    audited = [d for d in v.draws if not d.suppressed]
    t, evidence = v.timing, v.timing["evidence"]
    kernels, unlike = _coverage.kernels_check([d.page["signatures"] for d in audited], evidence["signatures"])
    v.details["timed_kernels"] = kernels
    if not unlike:  # ... with the values every draw gave them
        v.details["timed_arguments"], unlike = _coverage.fixed_check(evidence["fixed_changed"])
    judged = Failure("decorative_dsl", unlike) if unlike else None
    if judged is None:
        audited_ms = [d.page["dsl_ms"] for d in audited]
        audited_long = [d.page["dsl_long_ms"] for d in audited]
        found, short = _coverage.dsl_time_check(audited_ms, evidence["dsl_ms"], v.session.device.type, audited_long)
        v.details["dsl_time"] = found
        judged = Failure("decorative_dsl", short, measured=True) if short else None
    if judged is None:  # what the launches changed: bytes, not time (not retried)
        bypass = v.details.get("bypass")
        credited = [o["dsl_share"] >= _coverage.WORK_SAMPLED_FLOOR for o in bypass[-1]["outputs"]] if bypass else None
        v.details["timed_work"], unworked = _coverage.work_check(
            [d.page["work"] for d in audited], evidence["work"],
            [dtype is not None and dtype.is_floating_point for dtype in v.shape.out_dtypes], credited,
        )  # fmt: skip
        judged = Failure("decorative_dsl", unworked) if unworked else None
    if judged is None and v.plan is not None:  # what the timed calls left to other code than the draws did
        judged = _priced_shortfall(v, float(v.details["timed_work"].get("float_shortfall", 0.0)))
    if judged is None:  # where the launches' written bytes came from: computed, or copied from their arguments
        v.details["timed_copies"], copied = _coverage.copied_check([d.page["work"] for d in audited], evidence["work"])
        judged = Failure("decorative_dsl", copied) if copied else None
    v.details["evidence_calls"] = {k: evidence[k] for k in ("ms", "launches", "footprints", "dsl_ms", "work")}
    if t["footprints"]:  # the scored calls' median footprint, beside the evidence calls' own
        v.details["evidence_calls"]["scored_footprint"] = statistics.median(t["footprints"])
    judged = (
        judged
        or scored_launches(t["launches_per_call"], evidence["launches"])
        or scored_footprint(t["footprints"], evidence["footprints"])
        or _scored_against_watched(v)
    )
    v.report.bypass_ok = judged is None  # the coverage phase passed to get here; a second round may pass again
    return judged


def _priced_shortfall(v: Verification, shortfall: float) -> Failure | None:
    """The plan with the timed calls' shortfall of DSL-made output priced (``_plankind.with_timed_shortfall``);
    a partial plan fails where the protocol requires full ones."""
    assert v.plan is not None
    plan = _plankind.with_timed_shortfall(v.plan, shortfall)
    if plan is v.plan:
        return None
    v.plan = plan
    v.details.setdefault("eager_work", {})["plan"] = plan.as_dict()
    v.report.plan, v.report.plan_eager_share = plan.kind, plan.eager_share
    required = plan.partial and v.protocol.require_full_plan
    return Failure("partial_plan", _plankind.require_full(plan)) if required else None


def _scored_against_watched(v: Verification) -> Failure | None:
    """The scored calls' time against the evidence calls', with the rule's figures in ``details["scored_time"]``:
    on cpu the time inside their DSL launches (the vault times every call's; ``_judge.scored_dsl_time``), on cuda
    the reported times, an evidence call's less what the gate spent measuring its work after the launch (the vault's
    clock: its device copies; ``_judge.scored_time``)."""
    t, evidence = v.timing, v.timing["evidence"]
    if not t["timed_ms"] or not evidence["ms"]:
        return None
    if v.session.device.type == "cpu":
        scored = [ms if ms is not None else 0.0 for ms in t["dsl_ms"]]
        watched = [ms if ms is not None else 0.0 for ms in evidence["dsl_ms"]]
        v.details["scored_time"] = {
            "measure": "dsl_ms", "scored_ms": statistics.median(scored), "watched_ms": statistics.median(watched),
            "floor_ms": scored_dsl_floor(scored, watched, t["launches_per_call"], evidence["launches"]),
        }  # fmt: skip
        return scored_dsl_time(scored, watched, t["launches_per_call"], evidence["launches"]) or _scored_host(v)
    watched = [ms - (w["ms"] if w is not None else 0.0) for ms, w in zip(evidence["ms"], evidence["work"], strict=True)]
    launches = shared_launches(t["launches_per_call"], evidence["launches"])
    v.details["scored_time"] = {
        "measure": "ms", "scored_ms": statistics.median(t["timed_ms"]), "watched_ms": statistics.median(watched),
        "harness_ms": statistics.median(t["null_ms"]) if t["null_ms"] else None,
        "floor_ms": scored_time_floor(watched, launches, t["null_ms"], len(t["timed_ms"])),
    }  # fmt: skip
    return scored_time(t["timed_ms"], watched, launches, t["null_ms"])


def _scored_host(v: Verification) -> Failure | None:
    """cpu: the scored calls' host work against the draws' eager operators' time (``_judge.scored_host_time``), with
    the rule's figures in ``details["host_time"]``."""
    t = v.timing
    draws = [r[1] for d in v.draws if not d.suppressed for r in d.page["records"] or () if r[0] == "eager_time"]
    scored_dsl = [ms if ms is not None else 0.0 for ms in t["dsl_ms"]]
    found, failure = scored_host_time(t["cpu_ms"], scored_dsl, t["null_cpu_ms"], draws, t["launches_per_call"])
    if found is not None:
        v.details["host_time"] = found.as_dict()
    return failure


def verdict(v: Verification) -> Failure | None:
    v.close_worker()  # no candidate worker lives while a reference worker imports its copy of the problems
    t0 = time.perf_counter()
    eager, cached = v.session.eager_baseline(v.problem, v.shape.workload, v.protocol)
    if not cached:
        v.timed("eager_s", t0)
    t = v.timing
    device_type = v.session.device.type
    runtime = statistics.median(t["timed_ms"])
    if device_type == "cuda":  # on cpu the null calls were judged in their own round (``cross_check``)
        slowed = calibration_check(t["null_ms"], t["null_trusted"], eager.null_ms, eager.null_trusted)
        if slowed and cached:
            # the cached baseline's overhead was measured under another moment's load: compare with a fresh one
            now, _ = v.session.eager_baseline(v.problem, v.shape.workload, v.protocol, fresh=True)
            slowed = calibration_check(t["null_ms"], t["null_trusted"], now.null_ms, now.null_trusted)
        if slowed:
            return Failure("timing_tamper", f"The reported call times disagree with the verifier's clock: {slowed}.")
        busy = _idle_against(v, runtime, eager.idle_cpu_ms)
        if busy and cached:  # the cached baseline's idle was measured under another moment's load
            now, _ = v.session.eager_baseline(v.problem, v.shape.workload, v.protocol, fresh=True)
            busy = _idle_against(v, runtime, now.idle_cpu_ms)
        if busy:
            return Failure("background_work", f"Work ran outside the timed calls: {busy}; finish all work in run().")
    v.details["timing"] = {
        **{k: t[k] for k in ("warmup_ms", "timed_ms", "host_ms", "pending_ms", "launches_per_call")},
        "null_ms": t["null_ms"],
        "median_ms": runtime,
        "round_trip_ms": [c.round_trip_ms for c in t["trusted"]],
        "worker_cpu_ms": [c.cpu_ms for c in t["trusted"]],
        "idle_cpu_ms": [c.idle_cpu_ms for c in t["trusted"]],
        "unique_input_buffers": t.get("unique"),
    }
    v.details["eager"] = eager.as_dict(cached)
    v.report.runtime_ms, v.report.eager_ms = runtime, eager.median_ms
    cap = v.protocol.speedup_cap
    v.report.speedup = min(eager.median_ms / runtime, cap) if runtime > 0 else cap
    launches = t["launches_per_call"]
    share = v.details["bypass"][0]["dsl_share"]
    v.report.feedback = (
        f"Correct on {v.protocol.correctness_draws} float64-anchored draws and "
        f"{len(v.details.get('timing_rechecks', []))} re-checked timed calls; bypass test passed "
        f"({min(launches)}-{max(launches)} DSL launches per call, {share:.0%} of the outputs produced by the DSL "
        "or computed from what it produced). "
        f"Median {fmt(runtime)} ms vs eager {fmt(eager.median_ms)} ms."
    )
    if v.plan is not None and v.plan.partial:
        v.report.feedback += " " + v.plan.describe()
    return None


def _idle_against(v: Verification, runtime: float, reference: list[float]) -> str | None:
    """cuda: the worker's CPU between its blocks against the eager reference's worker's on the same plan (the
    harness's own cost there: staging the arenas in and out, the CUDA runtime's bookkeeping), with the figures."""
    v.details["idle_cpu"] = idle_figures(v.timing["trusted"], runtime, "cuda", reference)
    return idle_check(v.timing["trusted"], runtime, "cuda", reference)


def _after_timing_draw(v: Verification, kind: str, seed: int, where: str, twin: int,
                       label: str) -> tuple[Draw, Failure | None]:  # fmt: skip
    """One correctness draw after the timing (``twin_draw``): ``kind`` "twin" or "stale", on the inputs of ``seed``,
    the control page's TWIN ``twin``; its outputs checked as a draw's (kept in ``details.twin_draw[label]``, not among
    the draws')."""
    s = v.shape
    block = Block([kind], s.draw, lambda: seed, s.out_specs, v.session.device, v.session.staged_arenas,
                  distinct=False, twin=[twin])  # fmt: skip
    call = block.calls[0]
    refs: list[Any] = []
    answers = v.call_block(block, [where], meanwhile=lambda: refs.extend(s.refs(call.inputs)))
    if isinstance(answers, Failure) or not answers:
        failed = (
            answers
            if isinstance(answers, Failure)
            else Failure("harness_tamper", f"The worker did not answer {where}.")
        )
        return Draw(-1, call.inputs, refs, {}, {}), failed
    draw = Draw(-1, call.inputs, refs, answers[0].reply, answers[0].page)
    checked: list[Any] = []
    failure = _checked(v, draw, block.arena(call), where, first=False, into=checked)
    v.details.setdefault("twin_draw", {})[label] = {"outputs": checked[0]["outputs"] if checked else None}
    if failure is None:  # an eager answer here is one (red team rt56 F0: eager code on every call after many
        # calls outside the dispatch mode, the twin and the stale draw included: their launches given what a timed
        # call's were, nothing left to give)
        measured = _eager_measure(v, draw, where)
        if isinstance(measured, Failure):
            failure = measured
        else:
            v.details["twin_draw"][label]["eager_work"] = measured[2].as_dict()
            if measured[2].covers:
                failure = Failure("decorative_dsl", _eagerwork.explain(measured[2], where.removeprefix("in ")))
    return draw, failure


def _twin_record(draw: Draw, where: str) -> list[Any] | Failure:
    found = next((r for r in draw.page.get("records") or () if r[0] == "twin"), None)
    if found is None:
        return Failure("harness_tamper", f"The worker's records of its launches {where} are missing.")
    return list(found[1:])


def twin_draw(v: Verification) -> Failure | None:
    """More correctness draws once the timing is done, against evidence calls the worker kept (``TWIN_CALLS`` of them,
    chosen before the timing, which the submission cannot tell from timed calls): a twin draw on each one's inputs
    (regenerated from its seed), whose launches' tensor arguments are compared byte by byte, where the draw's recorded
    writers left them, with what that call's launches were given (``_provenance.twin_launch``: same inputs, same code,
    same bytes; a draw that repeats what the evidence call did runs its eager code where the eager-work rule reads it,
    ``_after_timing_draw``); and the stale draw, on inputs of its own, its launches given the first kept call's bytes
    wherever nothing in the draw wrote (``_provenance.twin_fill``: a kernel that reads which call it is in, or an
    answer, from a workspace the draws leave fresh decodes another call's answer there). In an order drawn per
    verification: a submission that tells the stale draw by its place after the timing (red team rt56 F1: a workspace
    written there alone, left fresh on the twin draw) writes it on a twin draw as often. Verifier README, "The twin
    draw"."""
    t0 = time.perf_counter()
    seeds = [seed for seed in v.timing.get("evidence", {}).get("kept") or () if seed is not None]
    if not seeds:
        return None
    draws = [lambda j=j, seed=seed: _twin(v, j, seed) for j, seed in enumerate(seeds)] + [lambda: _stale(v)]
    rng.shuffle(draws)
    v.details["twin_draw"] = {"launches_kept": 0, "launches_compared": 0, "launches_missed": 0,
                              "launches_unmatched": 0, "bytes_differing": 0, "bytes_compared": 0,
                              "first_differing": None, "twin_calls": len(seeds)}  # fmt: skip
    for draw in draws:
        failure = draw()
        if failure is not None:
            return failure
    v.timed("twin_draw_s", t0)
    return None


def _twin(v: Verification, j: int, seed: int) -> Failure | None:
    where = "in a correctness draw on the inputs of one of the timed calls"
    draw, failure = _after_timing_draw(v, "twin", seed, where, TWIN_DRAW + j, "twin" if j == 0 else f"twin {j + 1}")
    found = failure or _twin_record(draw, where)
    if isinstance(found, Failure):
        return found
    kept, compared, missed, unmatched, differ, compared_bytes, at_launch, at_argument, _ = found
    summary = v.details["twin_draw"]
    for key, value in (("launches_kept", kept), ("launches_compared", compared), ("launches_missed", missed),
                       ("launches_unmatched", unmatched), ("bytes_differing", differ),
                       ("bytes_compared", compared_bytes)):  # fmt: skip
        summary[key] += value
    if at_launch >= 0 and summary["first_differing"] is None:
        summary["first_differing"] = {"launch": at_launch, "argument_bytes": at_argument}
    if differ or missed or unmatched:
        told = (
            f"{missed + unmatched} of its DSL launches were not given the same kernels, numbers and tensor layouts"
            if missed or unmatched
            else f"a tensor argument of {at_argument} bytes of DSL launch {at_launch} held other bytes ({differ} of "
            f"the {compared_bytes} compared differ over the call's launches)"
        )
        return Failure(
            "decorative_dsl",
            f"On the inputs of one of the timed calls, run again as a correctness draw, {told} than when that timed "
            "call ran: the DSL kernels were given other work on the timed calls than on the correctness draws (a "
            "switch, a key or an answer made for the calls the verifier does not watch). Run the same code on "
            "every call.",
        )
    return None


def _stale(v: Verification) -> Failure | None:
    where = "in a correctness draw whose unwritten memory held what a timed call's kernels found there"
    draw, failure = _after_timing_draw(v, "stale", rng.getrandbits(63), where, STALE_DRAW, "stale")
    found = _twin_record(draw, where) if failure is None else failure
    if isinstance(found, Failure):
        if found.code in ("harness_tamper", "decorative_dsl"):  # (the draw's own records: an eager answer)
            return found
        return Failure(
            found.code,
            found.feedback + " This draw's DSL launches found, wherever nothing in the draw had written (memory "
            "fresh from the allocator, a workspace an earlier call left), the bytes one of the timed calls' launches "
            "found there: a correct kernel reads none of them, and one that does took them for its answer or for "
            "which call it was in. Write every workspace before a kernel reads it.",
        )
    v.details["twin_draw"].setdefault("stale", {})["bytes_given"] = found[8]
    return None


PHASES = (
    ("static_scan", static_scan),
    ("worker", start_worker),
    ("correctness", correctness),
    ("coverage", coverage),
    ("timing_rounds", timing_rounds),  # timing → cross-check, a timing failure confirmed by a second round
    ("twin_draw", twin_draw),  # a draw on an evidence call's inputs: the same launches given the same bytes
    ("speed_of_light", speed_of_light),
    ("verdict", verdict),
)
