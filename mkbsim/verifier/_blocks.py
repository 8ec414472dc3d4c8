"""Blocks of timed calls (DESIGN §5, timing): the timing protocol's calls run back to back in the worker.

Between two calls the worker runs nothing but its own bookkeeping of the last one: under the paper protocol
the GPU waits for the host, and after any pause of the host (staging the next draw, the verifier's checks,
a socket round trip) the same ``run()`` cost 4-6x its host time in a plain loop (benchmarks/RESULTS.md,
"Cold host on the H200"). So the verifier draws every call's fresh inputs ahead, lays all of a block's
arenas out in one allocation (``_arena.BlockArenas``), staged into the worker's memory before the first
call, arms one control-page slot per call (``_control``: evidence and null calls named there only), and
sends the block in one message whose every call looks the same; the worker answers once. Each call's
outputs stay in its own slots until then (as it delivered them: the harness puts back its copies), so the
calls re-checked are drawn after the block answered. Unscored warm-ups are sent as a block of their own
before the calls they warm up (``parts``): each call's tensors reach only its own arena through their storage
(``_mapped.block_memory``), but a raw pointer (a DSL kernel addressing past its argument) reaches the whole block.

The block's arenas take at most ``BUDGET_SHARE`` of the memory available (the device's free memory or the
host's, and the worker's limit); a plan that does not fit runs as several blocks, each after the first led by
``BLOCK_WARMUP`` unscored warm-up calls. A block's warm-up calls share one arena (their outputs are not read).
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from mkbsim.verifier._arena import BlockArenas, block_bytes, delivered_bytes
from mkbsim.verifier._control import MAX_BLOCK_CALLS, ControlPage
from mkbsim.verifier._judge import fmt
from mkbsim.verifier._process import WorkerHandle
from mkbsim.verifier._trusted import PARALLEL_CORES, Trusted

#: A block's arenas may take this share of the memory available: the verifier keeps its own copy of every
#: call's inputs, and a staged arena exists on each side of the sandbox and in the pages between them.
BUDGET_SHARE = 0.125
#: Calls the worker runs with the provenance audit (correctness draws; one per block: the control page holds
#: one call's records).
AUDITED = ("draw", "suppressed", "twin", "stale")
#: Unscored warm-up calls before the scored calls of every block after the first (the host warms up again
#: after the verifier's checks between blocks).
BLOCK_WARMUP = 3


#: A scored block's calls may take, in all, what the median call of each kind explains, plus this share of
#: the work the medians explain (their excess over the null calls' median, the harness's own cost) and a noise
#: allowance per call measured on the null calls (``NULL_SPREAD_FACTOR`` times their spread, or
#: ``NULL_SKEW_FACTOR`` times their skew, if more), plus one timed call's own cost and the null calls' worst excess
#: (a call's cost: cpu the lesser of the worker's CPU time and the host clock, at least its CPU time over
#: ``PARALLEL_CORES``, see ``total_check``; cuda the host clock). Measured on honest plans (benchmarks/RESULTS.md,
#: "Block totals"). So a plan doing the scored calls' work in a few of them (a raw pointer reaches
#: every later call's inputs of a block) hides at most this share of a call's work, plus that noise allowance.
TOTAL_SLACK = {"cpu": 0.5, "cuda": 0.5}
#: cpu: per call, the noise allowed is this multiple of the null calls' spread (their mean distance from their
#: median, all blocks of the round): the harness's own noise, measured, not a share of its level. The level grows
#: with what the harness copies per call (the in-place state it keeps aside: 32 MB of block tables, 3.3-4.8 ms of CPU
#: a call for p26 at PRODUCTION on this VM), not with its noise; a quarter of it per call, and one whole call per
#: block, let a block's first call do every later call's slot mappings there (red team rt12 F2).
NULL_SPREAD_FACTOR = 2.0
#: ...and at least this (the clocks' granularity: null calls of one cost leave nothing else)
NOISE_FLOOR_MS = 0.01
#: cuda: the noise allowed per call is this share of the harness's level (the null calls' median host clock), and
#: one whole timed call per block: calibrated on the H200 (sessions 9-10, ``BLOCK_SHIFT_QUANTILE``), where the
#: harness copies the in-place state on the device (a few µs for p26's 32 MB) and its level is the host's
#: bookkeeping; cpu: None (the spread above).
HARNESS_LEVEL_NOISE: dict[str, float | None] = {"cpu": None, "cuda": 0.25}
#: Per call, the noise allowed is at least this multiple of the null calls' own skew (their mean cost over their
#: median, all blocks of the round): on a loaded machine preemption and cold caches lengthen a few calls of every
#: kind, which adds up over a block (an honest one-launch cpu kernel at SMOKE failed 2 of 3 rounds at load 5 before),
#: and the null calls (the harness timing its own trivial function, no submission code in them) measure it in the
#: same blocks. On a quiet machine the skew is a few µs and the spread (cpu) or the level (cuda) rules.
NULL_SKEW_FACTOR = 1.5
#: null calls needed for their skew to count
NULL_SKEW_MIN_CALLS = 5
#: A block the machine slowed as a whole (clocks, the staging before it, another process) is allowed the shift of
#: its lower third: the residual (a call's cost less its kind's median) that a third of its calls stay under, on
#: each of its calls. Work moved into a few calls leaves most calls at or under their medians, so the shift it
#: earns is nil; a shift of s needs two thirds of the block's calls each s slow, and a plan whose calls are mostly
#: slow is scored slow (the median). The lower third, not the median: a block half cheap, half slow would earn
#: the midpoint. H200, 2026-12-02: an honest split-KV MLA decode kernel (p14, CuTe DSL and TIRx) failed both rounds
#: of two sessions with one block of 12 calls each 0.07-0.9 ms over its median, null calls included (excess 2.9-4.2
#: ms against 2.4-3.6 allowed); the first fix counted the block's null calls only, and the next run's slowed
#: blocks held one or two of them.
BLOCK_SHIFT_QUANTILE = 1 / 3
#: calls a block needs for its shift to count (a quantile of a handful of calls is one call)
BLOCK_SHIFT_MIN_CALLS = 6


def total_check(blocks: Sequence[Sequence[tuple[str, Trusted]]], device_type: str) -> tuple[dict[str, Any], str | None]:
    """Each scored block's calls (timed, evidence and null) in all against what the median of each kind
    explains: a raw pointer reaches every later call's inputs of a block, so work done for many calls in a few
    of them shows here (the median does not move); (the figures, the reason it fails or None)."""

    def cost(trusted: Trusted) -> float:
        # cpu: the lesser of the worker's CPU time (no preemption in it) and the host clock (no idle pool thread
        # spinning in it, which an honest TVM kernel's pool does on a loaded machine); work shows in both, and
        # work in parallel shows in the CPU time beyond PARALLEL_CORES
        if device_type == "cpu" and trusted.cpu_ms is not None:
            return max(min(trusted.cpu_ms, trusted.round_trip_ms), trusted.cpu_ms / PARALLEL_CORES)
        return trusted.round_trip_ms

    by_kind: dict[str, list[float]] = {}
    for calls in blocks:
        for kind, trusted in calls:
            by_kind.setdefault(kind, []).append(cost(trusted))
    medians = {kind: statistics.median(xs) for kind, xs in by_kind.items()}
    harness = medians.get("null", 0.0)
    slack = TOTAL_SLACK.get(device_type, TOTAL_SLACK["cuda"])
    nulls = by_kind.get("null", [])
    counted = len(nulls) >= NULL_SKEW_MIN_CALLS
    skew = statistics.fmean(nulls) - harness if counted else 0.0
    spread = statistics.fmean(abs(x - harness) for x in nulls) if counted else 0.0
    level = HARNESS_LEVEL_NOISE.get(device_type, HARNESS_LEVEL_NOISE["cuda"])
    if level is not None:  # cuda: a share of the harness's level, and one whole timed call (the H200's calibration)
        per_call_noise = max(level * harness, NULL_SKEW_FACTOR * skew)
        one = medians.get("timed", max(medians.values()))
    else:
        per_call_noise = max(NULL_SPREAD_FACTOR * spread, NULL_SKEW_FACTOR * skew, NOISE_FLOOR_MS)
        # and one call's worth: the first call after the pause before a block may run cold (a block of few calls): a
        # timed call's own cost and the harness's worst (the null calls' largest excess over their median), not its
        # level: p26's 32 MB copied aside in each 4.9 ms call let one call do a block's work (red team rt12 F2)
        one = max(medians.get("timed", harness) - harness, 0.0) + max((x - harness for x in nulls), default=0.0)
    excess, allowed, shifts = [], [], []
    for calls in blocks:
        excess.append(sum(cost(trusted) - medians[kind] for kind, trusted in calls))
        residuals = sorted(cost(trusted) - medians[kind] for kind, trusted in calls)
        low = residuals[int((len(residuals) - 1) * BLOCK_SHIFT_QUANTILE)] if residuals else 0.0
        shift = max(low, 0.0) if len(residuals) >= BLOCK_SHIFT_MIN_CALLS else 0.0
        shifts.append(shift)
        # an evidence call's own excess is the gate's measuring, not work: the timed median stands for both
        work = sum(max(medians.get("timed", harness) - harness, 0.0) for kind, _ in calls if kind != "null")
        allowed.append(slack * work + (per_call_noise + shift) * len(calls) + one)
    ratios = [e / a if a > 0 else 0.0 for e, a in zip(excess, allowed, strict=True)]
    found = {
        "excess_ms": [round(e, 3) for e in excess],
        "allowed_ms": [round(a, 3) for a in allowed],
        "ratios": [round(r, 3) for r in ratios],
        "medians_ms": {k: round(m, 4) for k, m in medians.items()},
        "null_skew_ms": round(skew, 4),
        "null_spread_ms": round(spread, 4),
        "block_shift_ms": [round(x, 4) for x in shifts],
    }
    worst = max(ratios, default=0.0)
    where = ratios.index(worst) if ratios else 0
    if blocks:  # where the worst block's excess lies: each call's cost less its kind's median, in order
        found["worst_calls"] = [[kind, round(cost(trusted) - medians[kind], 3)] for kind, trusted in blocks[where]]
    if worst <= 1.0:
        return found, None
    return found, (
        f"the calls of timing block {where + 1} took {fmt(excess[where])} ms more in all than the median call "
        f"of each kind explains (at most {fmt(allowed[where])} ms): work for several calls was done in a few "
        "of them"
    )


def budget_bytes(device: torch.device, worker_limit: int) -> int:
    """The bytes a block's arenas may take: a share of the device's free memory (cuda) or of the host's
    available memory (cpu), and of the worker's own memory limit."""
    if device.type == "cuda":
        available = int(torch.cuda.mem_get_info(device)[0])
    else:
        with open("/proc/meminfo") as f:
            available = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    return int(BUDGET_SHARE * min(available, worker_limit))


def plan(scored: Sequence[str], warmups: int, per_call: int, budget: int, distinct: bool) -> list[list[str]]:
    """The calls of the timing plan in blocks: ``warmups`` lead the first block, ``BLOCK_WARMUP`` every later
    one; as many of the ``scored`` (timed, evidence and null calls, in their secret order) as fit the budget,
    with one arena for the block's warm-ups (``distinct``: one each, see ``Block``)."""
    lead = max(warmups, BLOCK_WARMUP)
    fit = max(1, min(budget // max(per_call, 1) - (lead if distinct else 1), MAX_BLOCK_CALLS - lead))
    # as many blocks as the budget needs, of even sizes: a short last block (one scored call after 84, the H200
    # 2026-12-03, p36 at production) carries the cold first call of a block alone, which the per-call noise of a
    # handful of calls cannot cover (honest kernels failed the block totals in every run)
    count = -(-len(scored) // fit)
    size = -(-len(scored) // count) if count else fit
    blocks = []
    for i in range(0, len(scored), size):
        blocks.append(["warmup"] * (warmups if i == 0 else BLOCK_WARMUP) + list(scored[i : i + size]))
    return blocks or [["warmup"] * warmups]


def parts(kinds: Sequence[str]) -> list[list[str]]:
    """A planned block as it is sent: its leading warm-ups in a block of their own, answered before the scored
    calls' block reaches the worker (no unscored call reaches a scored call's inputs: verifier README, "Blocks")."""
    lead = next((i for i, kind in enumerate(kinds) if kind != "warmup"), len(kinds))
    return [list(part) for part in (kinds[:lead], kinds[lead:]) if part]


def plan_for(
    shape: Any, device: torch.device, worker_limit: int, warmups: int, scored: Sequence[str], distinct: bool
) -> list[list[str]]:
    """``plan`` for ``shape``'s calls on ``device`` (one draw measures a call's arena and the worker's copies of what
    the call delivers)."""
    draw = shape.draw()
    # the block's memory, and the worker's copies of what each call delivers (its outputs and in-place inputs)
    per_call = block_bytes(draw, shape.out_specs) + delivered_bytes(draw, shape.out_specs, shape.inplace)
    return plan(scored, warmups, per_call, budget_bytes(device, worker_limit), distinct)


@dataclass
class BlockCall:
    """One call of a block: its kind, the seed of its draw (kept in this process only), the inputs (the
    verifier's private copy), its arena, and once answered, the worker's reply, the control page's slot and
    the verifier's trusted measure of it."""

    kind: str
    seed: int
    inputs: list[Any]
    arena_index: int
    reply: dict[str, Any] | None = None
    page: dict[str, Any] | None = None
    trusted: Trusted | None = None


class Block:
    """A block's calls and their arenas: every call on fresh inputs of its own, but the warm-ups, which share
    one arena unless the protocol wants ``distinct`` input buffers for every call (hardened)."""

    def __init__(self, kinds: Sequence[str], draw: Callable[[int], list[Any]], seed: Callable[[], int],
                 out_specs: Sequence[Any], device: torch.device, staged: bool, distinct: bool,
                 twin: Sequence[int] = ()) -> None:  # fmt: skip
        """``twin``: each call's value of the control page's TWIN (``_control``; none given: 0 each)."""
        self.twin = list(twin) or [0] * len(kinds)
        self.calls: list[BlockCall] = []
        draws: list[list[Any]] = []
        for kind in kinds:
            if kind == "warmup" and self.calls and not distinct:  # the warm-ups share the first call's arena
                first = self.calls[0]
                self.calls.append(BlockCall(kind, first.seed, first.inputs, first.arena_index))
                continue
            s = seed()
            inputs = draw(s)
            self.calls.append(BlockCall(kind, s, inputs, len(draws)))
            draws.append(inputs)
        self.memory = BlockArenas(draws, out_specs, device, staged)

    def arena(self, call: BlockCall) -> Any:
        return self.memory.arenas[call.arena_index]


Sent = tuple[list[int], float, int | None, int | None]


def send(worker: WorkerHandle, control: ControlPage, block: Block, flush: bool) -> Sent:
    """Arm one slot per call and send the block; (the calls' nonces, the verifier's clocks when it left: host, the
    worker's process CPU and its main thread's)."""
    device = block.memory.device
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    orders = [(c.kind == "evidence", c.kind == "null", c.kind in AUDITED, c.kind == "suppressed", twin)
              for c, twin in zip(block.calls, block.twin, strict=True)]  # fmt: skip
    nonces = control.begin_block(orders)
    desc, fds = block.memory.descriptor()
    msg = {"op": "block", "block": desc, "calls": [c.arena_index for c in block.calls], "flush": flush}
    sent = (time.perf_counter(), worker.clock.cpu_ns(), worker.thread_clock.cpu_ns())
    try:
        worker.send(msg, fds)
    finally:
        block.memory.release_fd()
    return nonces, *sent


def receive(worker: WorkerHandle, control: ControlPage, block: Block, sent: Sent, timeout: float,
            samples: Sequence[int] = ()) -> tuple[dict[str, Any], str | None]:  # fmt: skip
    """Wait for the block's answer (``timeout`` from the last call that started) and fill in every answered
    call's reply, slot and trusted measure; (the block's own reply, the reason it is not the harness's or
    None). ``Malformed`` where a slot is not of the vaults' form; ``WorkerFailed`` where the worker died."""
    nonces, *clocks = sent
    try:
        exchange = worker.answer(timeout, control.progress)
        answered = (time.perf_counter(), worker.clock.cpu_ns(), worker.thread_clock.cpu_ns())
        state = control.block_state()
        replies = exchange.reply.get("calls") or []
        slots = [control.slot_report(i, nonces[i], samples) for i in range(min(len(replies), len(nonces)))]
    finally:
        control.end_block()
    block.memory.arrived()
    if not exchange.reply.get("ok") or "calls" not in exchange.reply:
        return exchange.reply, "the worker's answer to a block is not of the harness's form"
    if state["fault"]:
        return exchange.reply, (
            "the harness's requests to its timer or to its copies of the outputs came out of its order (a call split "
            "or left untimed, a copy forged)"
        )
    if len(replies) > len(block.calls) or state["loaded"] != len(replies):
        return exchange.reply, (
            f"the worker answered {len(replies)} of the block's {len(block.calls)} calls and its timer started "
            f"{state['loaded']}"
        )
    if not state["ended"] or not all(s["loaded"] for s in slots):
        return exchange.reply, "the worker's timer did not time the block's calls one after the other"
    wrong = within(state, slots, tuple(clocks), answered)
    measures = trusted_calls(slots, state, exchange.trusted)
    if wrong or isinstance(measures, str):
        return exchange.reply, wrong or str(measures)
    for call, reply, slot, measure in zip(block.calls, replies, slots, measures, strict=False):
        call.reply, call.page, call.trusted = reply, slot, measure
    return exchange.reply, None


def trusted_calls(slots: Sequence[dict[str, Any]], state: dict[str, Any], block: Trusted) -> list[Trusted] | str:
    """Each answered call's trusted measure from the timer vault's stamps: from its start to the next call's
    (the last one's: to the block's end), on the host clock and the process's CPU clock. The CPU the worker
    used while it waited for the block (measured by the verifier, from its previous answer to this send) is
    shared among the block's calls: one gap between blocks stands for the gaps between as many single calls
    (``_trusted.idle_check`` judges the CPU per gap). The CPU clock of the thread running the calls, read with the
    process's, shows what of the call's CPU time ran on it (``_trusted.wall_bound``). A reason instead where the
    stamps do not run forward."""
    starts = [(s["start_t"], s["start_cpu_ns"], s["start_thread_cpu_ns"]) for s in slots]
    starts.append((state["end_t"], state["end_cpu_ns"], state["end_thread_cpu_ns"]))
    idle = block.idle_cpu_ms / max(len(slots), 1) if block.idle_cpu_ms is not None else None
    waited = block.idle_ms / max(len(slots), 1) if block.idle_ms is not None else None
    out = []
    for (t0, c0, h0), (t1, c1, h1) in itertools.pairwise(starts):
        if t1 < t0 or c1 < c0 or h1 < h0:
            return "the timer's stamps of the block's calls do not run forward"
        out.append(Trusted(round_trip_ms=(t1 - t0) * 1e3, cpu_ms=(c1 - c0) / 1e6, idle_cpu_ms=idle, idle_ms=waited,
                           thread_cpu_ms=(h1 - h0) / 1e6))  # fmt: skip
    return out


def within(
    state: dict[str, Any], slots: Sequence[dict[str, Any]], sent: tuple[Any, ...], answered: tuple[Any, ...]
) -> str | None:  # fmt: skip
    """The vault's stamps lie inside the verifier's own measure of the block (the same host clock, and the
    worker's CPU clocks the verifier reads from outside, its process's and its main thread's; ``sent`` and
    ``answered``: those three readings): the calls' trusted measures are parts of it."""
    if not slots:
        return None
    if not sent[0] <= slots[0]["start_t"] <= state["end_t"] <= answered[0]:
        return "the timer's stamps of the block lie outside the verifier's clock around it"
    for i, (start, end, what) in enumerate(
        (("start_cpu_ns", "end_cpu_ns", "CPU"), ("start_thread_cpu_ns", "end_thread_cpu_ns", "thread CPU")), 1
    ):
        if sent[i] is None or answered[i] is None:
            continue
        if not sent[i] <= slots[0][start] <= state[end] <= answered[i]:
            return f"the timer's {what} stamps of the block lie outside the worker's {what} time the verifier read"
    return None
