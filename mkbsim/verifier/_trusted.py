"""The verifier's own measures of a worker (DESIGN §5 "time the submission cannot touch").

The worker's timer writes each call's time to the control page; these measures bound it from outside:

* the wall-clock round trip of every call, on the verifier's clock;
* the CPU time of the worker's whole process (every thread, from the kernel's per-process CPU clock):
  during each call, and between calls (when the worker should be idle in ``recv``). Unlike a wall clock
  it does not grow while the worker waits for a busy machine;
* null calls, interleaved with the timed calls in the same worker: the harness times its own trivial
  function instead of run(), so the worker's overhead around a call is measured in the very process,
  under the very load, that the submission's calls ran in.

The reported median must be supported by the trusted measure within a relative tolerance (``TOLERANCE``)
above the null calls' own spread, and so must the upper quartile of the calls' unexplained time; otherwise
the verdict is ``timing_tamper``. The noise allowed comes from the null calls alone, never from the spread
of the submission's own calls: a submission that under-reports some calls by a lot and others not at all
makes that spread as wide as it likes. Work moved outside the
timed region (into the harness's post-processing, a finalizer, a thread) shows as trusted time the
reported one does not account for, or as CPU time between calls (``background_work``).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: The reported median may be below the trusted estimate by this share of itself...
TOLERANCE = 0.25
#: ...plus this many standard errors of the estimate (the difference of two medians, both with the null
#: calls' spread in this worker: 1.85 MAD / sqrt(n) is a median's standard error for normal noise), plus a
#: floor for the clocks' granularity.
NOISE_SIGMAS = 4.0
FLOOR_MS = 0.01
#: The calls' unexplained time at this quantile may exceed the median's limit by this many of the null calls'
#: deviations (1.4826 MAD): under-reporting a share of the calls shows there even when it leaves the median ...
UPPER_QUANTILE = 0.75
QUANTILE_SIGMAS = 3.0
#: ... or by the null calls' own rise from their median to this quantile, if more: on a loaded VM the CPU clock runs
#: on while the host deschedules the virtual core, so a quarter to a third of the calls, null calls alike, cost 0.1-0.4
#: ms more (the p36 example under 3 busy loops: null calls 0.21 ms, 24-36% of them 0.29-0.59; its timed calls' excess
#: 0.196-0.198 ms at the quartile, 0.12-0.19 allowed by the deviations, which the spike-free majority keeps small:
#: an honest kernel failed as tampered in about 1 verification of 40 there, and in the suite). A timed call is longer
#: than a null call, so more of them meet a spike: their quartile is in the spikes where the null calls' is not yet,
#: and the null calls' rise is read higher, where the spikes are whenever a tenth of the calls meet one. The calling
#: thread of a null call runs the harness's steps only, and threads beside it are bounded (``NULL_OTHERS_MS``): the
#: submission cannot widen this rise.
NULL_SPIKE_QUANTILE = 0.9
#: Taking the null calls' overhead off a call is precise to this share of the overhead: a load spike in
#: CI once cost the null calls 9.6 ms of CPU each and left an honest 0.1 ms call at -0.1 ms.
HARNESS_PRECISION = 0.05
#: Between calls the worker sleeps in recv; more CPU than this per gap (median) is background work. On
#: cuda the worker's own cleanup after a call (the caching allocator's frees, the DSL runtimes'
#: bookkeeping) takes more: 0.08-0.1 ms measured on the H200 for honest p26.
IDLE_FLOOR_MS = {"cpu": 0.05, "cuda": 0.25}
#: On cuda the line is also this factor of the CPU the eager reference's worker spends between its blocks (per call,
#: median): it runs the same blocks (the same arenas staged in and out, the same pauses while the verifier draws the
#: next one) with no submission, so the harness's own cost there is measured, not guessed. Honest p01 decode kernels
#: used 0.25-0.29 ms a call there on the H200 (2026-12-02, blocks of six 600 MB arenas), over the floor.
IDLE_REFERENCE_FACTOR = 2.0
#: ...and so is device work still running after the timed stream finished, by more than the null
#: calls' median plus this many of their deviations, or the floor, or this share of the median call
#: (honest multi-launch calls of several ms left 12-76 µs there on the H200; a tail over
#: ``PENDING_CHARGE_MS`` is charged to its call anyway).
PENDING_MADS = 4.0
PENDING_FLOOR_MS = 0.002
PENDING_SHARE = 0.05
#: cuda: the null calls' overhead (the round trip minus the reported time) may exceed the overhead of the same
#: harness's null calls in the eager reference's worker, which runs no submission, by this factor plus the
#: floor; more means the submission slowed the null calls to widen the trusted check's allowance.
CALIBRATION_FACTOR = 4.0
CALIBRATION_FLOOR_MS = 0.25
#: cpu: the CPU the worker's threads other than the calling one spend during a null call (mean over the null
#: calls). During a null call the calling thread runs the harness's own steps, the same on every call (no
#: finalizer, collector callback, signal handler or tracer of the submission's can run there), so only another
#: thread's work can make a null call cost more than the harness around a timed call: CPU of its own, which this
#: bounds in the very calls and worker it inflates, and which load does not inflate (an idle thread spends none
#: however busy the machine: honest null calls 0.000-0.011 ms at 8 busy processes on this 2-core VM, where the
#: calling thread's overhead doubled; one pool run 0.038, from a single null call with 0.7 ms of a pool thread's, so a
#: failure is confirmed by a second round). The eager reference's worker cannot calibrate the calling thread's part:
#: its harness has no guards, 2-6x cheaper a null call, measured at another moment (CI's pool case 0.83 ms against
#: 0.12, load changes both apart) (benchmarks/calibration_under_load.py).
NULL_OTHERS_MS = 0.05

#: cpu: the cores a call's CPU time may have run on at once: the worker's one computing thread (its pools are pinned
#: to ``Limits.cpu_threads`` = 1) and one more, a pool thread spinning idle beside it (which honest TVM kernels' pools
#: do on a loaded machine) or threads of the submission's launching at once. The block totals cost work spread over
#: more threads at its CPU time over this (the red team's rt8b F2: a look-ahead by k threads cost 1/k of its work);
#: the cross-check bounds a call's wall time below by it where the CPU did run beside the calling thread
#: (``wall_bound``).
PARALLEL_CORES = 2

#: What slows the null calls, honest or not: the worker's threads busy around them.
SLOWED = (
    "something slowed the null calls (CPU the worker's threads spend around them: work left running, or a DSL "
    "runtime's threads spinning after a parallel region when TVM_NUM_THREADS or OMP_NUM_THREADS is set above the "
    "worker's thread count; leave those as the verifier sets them)"
)


class ProcessClock:
    """CPU time of a whole process (every thread, those that already ended included), read from the
    kernel's per-process CPU clock (``clock_gettime`` on the clock id Linux derives from a pid), with
    nanosecond resolution; None once the process is gone."""

    def __init__(self, pid: int) -> None:
        self.clock_id = (~pid << 3) | 2  # MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)

    def cpu_ns(self) -> int | None:
        try:
            return time.clock_gettime_ns(self.clock_id)
        except OSError:
            return None


class ThreadClock:
    """CPU time of one thread of another process (the worker's main thread, which runs the calls), from the kernel's
    scheduler statistics (``/proc/<pid>/task/<tid>/schedstat``, ns; a thread clock of another process cannot be read
    with ``clock_gettime``). Current whenever the thread is blocked, as the worker's is in ``recv`` when the verifier
    sends, and from the worker's own last reading of its clock on (which brings it up to date), as the timer vault's
    at the block's end is: the verifier's readings bound the vault's stamps. None once the thread is gone."""

    def __init__(self, pid: int, tid: int) -> None:
        self.path = f"/proc/{pid}/task/{tid}/schedstat"

    def cpu_ns(self) -> int | None:
        try:
            with open(self.path, "rb") as stats:
                return int(stats.read().split()[0])
        except (OSError, ValueError, IndexError):
            return None


@dataclass(frozen=True)
class Trusted:
    """The verifier's measures of one call."""

    round_trip_ms: float
    cpu_ms: float | None  # all threads, from the send to the answer
    idle_cpu_ms: float | None  # all threads, from the previous answer to this send
    idle_ms: float | None = None  # the host clock over the same wait
    thread_cpu_ms: float | None = None  # the thread running the call, over the call (blocks: the timer vault's)


def _mad(xs: Sequence[float]) -> float:
    mid = statistics.median(xs)
    return float(statistics.median(abs(x - mid) for x in xs))


def _quantile(xs: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``xs`` (linear between order statistics)."""
    ordered = sorted(xs)
    at = q * (len(ordered) - 1)
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (at - low))


def _method(calls: Sequence[Trusted], nulls: Sequence[Trusted], device_type: str) -> str:
    cpu = device_type == "cpu" and all(t.cpu_ms is not None for t in (*calls, *nulls))
    return "cpu" if cpu else "wall"


def wall_bound(t: Trusted) -> float:
    """What the worker's CPU clocks show the call's wall time was at least: its CPU time, where the thread running
    the call spent it all; where threads beside it spent some (a pool's launches, eager operators on two threads),
    the larger of the calling thread's share and the whole over ``PARALLEL_CORES``. An honest call on two threads
    spends up to twice its wall time in CPU, which a quiet host runs at once; a call on one thread gets no
    allowance, and a reported time under this is one no host could have measured."""
    assert t.cpu_ms is not None
    if t.thread_cpu_ms is None:
        return float(t.cpu_ms)
    return max(min(t.thread_cpu_ms, t.cpu_ms), t.cpu_ms / PARALLEL_CORES)


def _measure(t: Trusted, method: str) -> float:
    return wall_bound(t) if method == "cpu" and t.cpu_ms is not None else t.round_trip_ms


def cross_check(
    reported: Sequence[float],
    calls: Sequence[Trusted],
    null_reported: Sequence[float],
    nulls: Sequence[Trusted],
    device_type: str,
) -> dict[str, Any]:
    """Whether the reported call times are supported by the verifier's measures (``tampered`` names why
    not), with the figures."""
    out: dict[str, Any] = {"tampered": None}
    impossible = sum(1 for t, r in zip(calls, reported, strict=True) if r < 0 or r > t.round_trip_ms)
    if impossible:  # no load makes a time measured inside the round trip exceed it: not a matter of noise
        out["tampered"] = f"{impossible} reported call times exceed the verifier's round trip around them"
        out["impossible"] = impossible
        return out
    if not nulls or device_type == "cuda":
        # on cuda the reported time is the device's (events on the timed stream) and the round trip holds
        # the call's host work too (argument conversion, Python): the verifier's clock bounds it from above
        # only; below, the speed of light bounds it
        return out
    method = _method(calls, nulls, device_type)
    null_over = [_measure(t, method) - r for t, r in zip(nulls, null_reported, strict=True)]
    harness = float(statistics.median(null_over))
    excess = [_measure(t, method) - r - harness for t, r in zip(calls, reported, strict=True)]
    spread = _mad(null_over)
    noise = 1.85 * spread * math.sqrt(1 / len(null_over) + 1 / len(excess))
    median_reported = float(statistics.median(reported))
    limit = TOLERANCE * median_reported + NOISE_SIGMAS * noise + FLOOR_MS
    upper = _quantile(excess, UPPER_QUANTILE)
    null_rise = _quantile(null_over, NULL_SPIKE_QUANTILE) - harness
    out.update(
        method=method,
        harness_ms=harness,
        harness_mad_ms=spread,
        standard_error_ms=noise,
        excess_median_ms=float(statistics.median(excess)),
        excess_limit_ms=limit,
        excess_upper_ms=upper,
        excess_upper_limit_ms=limit + max(QUANTILE_SIGMAS * 1.4826 * spread, null_rise),
        trusted_estimate_ms=median_reported + float(statistics.median(excess)),
    )
    # the null calls cost more than the submission's, beyond the two medians' noise and the subtraction's
    # own precision (a share of the overhead taken off): they were slowed
    out["negative_limit_ms"] = -(NOISE_SIGMAS * noise + FLOOR_MS + HARNESS_PRECISION * max(harness, 0.0))
    if out["trusted_estimate_ms"] < out["negative_limit_ms"]:
        out["tampered"] = (
            f"with the null calls' harness overhead ({harness:.4g} ms) taken off, the verifier's {method} clock "
            f"leaves {out['trusted_estimate_ms']:.4g} ms for the median call: {SLOWED}"
        )
    elif out["excess_median_ms"] > limit:
        out["tampered"] = (
            f"the verifier's {method} clock puts the median call at {out['trusted_estimate_ms']:.4g} ms, the "
            f"worker reported {median_reported:.4g} ms (tolerance {TOLERANCE:.0%} plus this worker's own noise, "
            f"{limit:.4g} ms in all)"
        )
    elif upper > out["excess_upper_limit_ms"]:
        out["tampered"] = (
            f"the verifier's {method} clock leaves {upper:.4g} ms unreported in a quarter of the calls (at most "
            f"{out['excess_upper_limit_ms']:.4g} ms allowed for calls reported at {median_reported:.4g} ms)"
        )
    return out


def idle_figures(
    calls: Sequence[Trusted], median_reported: float, device_type: str, reference: Sequence[float] = ()
) -> dict[str, float] | None:
    """The worker's CPU between calls (median per call) and its line: the floor, half the median call, and
    ``IDLE_REFERENCE_FACTOR`` of ``reference`` (the eager reference's worker's, same measure) where given."""
    idle = [t.idle_cpu_ms for t in calls if t.idle_cpu_ms is not None]
    if not idle:
        return None
    limit = max(IDLE_FLOOR_MS[device_type], 0.5 * median_reported)
    found = {"median_ms": float(statistics.median(idle)), "limit_ms": limit}
    waits = [t.idle_ms for t in calls if t.idle_ms is not None]
    if waits and statistics.median(waits) > 0:  # the share of a core the worker used while it waited
        found["cpu_share"] = found["median_ms"] / float(statistics.median(waits))
    if reference:
        found["reference_ms"] = float(statistics.median(reference))
        found["limit_ms"] = max(limit, IDLE_REFERENCE_FACTOR * found["reference_ms"])
    return found


def idle_check(
    calls: Sequence[Trusted], median_reported: float, device_type: str, reference: Sequence[float] = ()
) -> str | None:
    """CPU time the worker spent between calls, when it should have been idle: background work."""
    found = idle_figures(calls, median_reported, device_type, reference)
    if found is None or found["median_ms"] <= found["limit_ms"]:
        return None
    seen = f"; the eager reference's worker {found['reference_ms']:.3f} ms" if "reference_ms" in found else ""
    return (
        f"the process used {found['median_ms']:.3f} ms of CPU between calls (median; idle workers use under "
        f"{found['limit_ms']:.3f} ms{seen})"
    )


def pending_check(pending: Sequence[float], null_pending: Sequence[float], median_reported: float) -> str | None:
    """Device work still running after the timed stream finished, beyond what the null calls show."""
    if not pending or not null_pending:
        return None
    base = float(statistics.median(null_pending))
    limit = base + max(PENDING_MADS * _mad(null_pending), PENDING_FLOOR_MS, PENDING_SHARE * median_reported)
    typical = float(statistics.median(pending))
    if typical > limit:
        return (
            f"device work ran on after the timed stream finished: {typical * 1e3:.1f} us per call (median), "
            f"against {base * 1e3:.1f} us for the harness's own calls"
        )
    return None


def null_others(nulls: Sequence[Trusted]) -> float | None:
    """The CPU the worker's threads beside the calling one spent during the null calls (mean, ms); None where the
    calling thread's clock was not read (a block's calls always carry it)."""
    spent = [t.cpu_ms - t.thread_cpu_ms for t in nulls if t.cpu_ms is not None and t.thread_cpu_ms is not None]
    return float(statistics.fmean(spent)) if spent and len(spent) == len(nulls) else None


def beside_check(nulls: Sequence[Trusted]) -> str | None:
    """cpu: whether threads beside the calling one spent CPU during the null calls (``NULL_OTHERS_MS``), which would
    slow them and widen the trusted check's allowance; judged in the very calls and worker, at the same moment."""
    others = null_others(nulls)
    if others is None or others <= NULL_OTHERS_MS:
        return None
    return (
        f"the worker's threads beside the one running the calls spent {others:.4g} ms of CPU during each null call "
        f"(mean; idle threads spend none, at most {NULL_OTHERS_MS:.4g} ms allowed): {SLOWED}"
    )


def calibration_check(
    null_reported: Sequence[float], nulls: Sequence[Trusted], eager_null_reported: Sequence[float],
    eager_nulls: Sequence[Trusted],
) -> str | None:  # fmt: skip
    """cuda: the null calls' harness overhead on the wall clock against the same harness's null calls in the eager
    reference's worker (one the submission never ran in): the calibration the submission cannot influence."""
    if not nulls or not eager_nulls:
        return None
    null_over = float(statistics.median(t.round_trip_ms - r for t, r in zip(nulls, null_reported, strict=True)))
    eager_over = float(
        statistics.median(t.round_trip_ms - r for t, r in zip(eager_nulls, eager_null_reported, strict=True))
    )
    limit = CALIBRATION_FACTOR * max(eager_over, 0.0) + CALIBRATION_FLOOR_MS
    if null_over > limit:
        return (
            f"the null calls' harness overhead ({null_over:.4g} ms a call, wall clock) is far above the same "
            f"harness's null calls in the eager reference's worker ({eager_over:.4g} ms; at most {limit:.4g} ms "
            f"allowed): {SLOWED}"
        )
    return None
