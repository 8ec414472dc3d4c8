"""The verifier's cross-check of the reported call times against its own measures (``_trusted``)."""

from __future__ import annotations

import threading
import time

from mkbsim.verifier._trusted import (
    FLOOR_MS,
    NOISE_SIGMAS,
    TOLERANCE,
    ProcessClock,
    Trusted,
    beside_check,
    calibration_check,
    cross_check,
    idle_check,
    idle_figures,
    pending_check,
)

HARNESS_MS = 0.2  # the worker's own CPU time around a call, as its null calls show it


def _calls(kernel_ms: float, n: int, spread: float = 0.004) -> list[Trusted]:
    cpu = [kernel_ms + HARNESS_MS + spread * (i % 3 - 1) for i in range(n)]
    return [Trusted(round_trip_ms=kernel_ms + 1.5, cpu_ms=c, idle_cpu_ms=0.0) for c in cpu]


NULLS = _calls(0.01, 10)
NULL_MS = [0.01] * 10


def test_consistent_times_pass_even_when_the_machine_is_busy() -> None:
    # long scheduling waits inflate the round trips, not the worker's CPU time
    check = cross_check([0.1] * 50, _calls(0.1, 50), NULL_MS, NULLS, "cpu")
    assert check["tampered"] is None and check["method"] == "cpu"
    assert abs(check["trusted_estimate_ms"] - 0.1) < 0.005


def test_a_call_longer_than_its_round_trip_is_impossible() -> None:
    check = cross_check([0.1, 5.0], _calls(0.1, 2), NULL_MS, NULLS, "cpu")
    assert check["tampered"] and "exceed" in check["tampered"]


def test_the_tolerance_is_relative_to_the_kernel_not_an_absolute_slack() -> None:
    # a 50 us kernel reported at a tenth of its time: the missing 45 us are far below the old 1 ms slack
    check = cross_check([0.005] * 50, _calls(0.05, 50), NULL_MS, NULLS, "cpu")
    assert check["tampered"] and "reported 0.005" in check["tampered"]
    # the same kernel reported within the tolerance passes
    honest = cross_check([0.05 / (1 + TOLERANCE / 2)] * 50, _calls(0.05, 50), NULL_MS, NULLS, "cpu")
    assert honest["tampered"] is None
    assert check["excess_limit_ms"] < 0.05 and FLOOR_MS < 0.05


def test_the_noise_floor_is_this_worker_s_own_spread() -> None:
    noisy = [Trusted(1.0, 0.01 + HARNESS_MS + (0.05 if i % 2 else -0.05), 0.0) for i in range(10)]
    check = cross_check([0.05] * 50, _calls(0.1, 50), NULL_MS, noisy, "cpu")
    assert check["harness_mad_ms"] > 0.04 and check["tampered"] is None  # 50 us missing, within 4 MADs of 50 us
    assert check["standard_error_ms"] > 0.02 and check["excess_limit_ms"] >= NOISE_SIGMAS * check["standard_error_ms"]


def test_without_cpu_times_the_wall_clock_decides() -> None:
    calls = [Trusted(0.1 + 0.3, None, None) for _ in range(50)]
    nulls = [Trusted(0.01 + 0.3, None, None) for _ in range(10)]
    check = cross_check([0.01] * 50, calls, NULL_MS, nulls, "cpu")
    assert check["method"] == "wall" and check["tampered"]


def test_on_cuda_the_wall_clock_bounds_the_device_time_from_above_only() -> None:
    # the H200 on 2026-12-01: host-heavy calls (argument conversion, Python) take 0.45 ms of wall time around
    # 0.126 ms of device time, and their null calls more than some calls: both are normal on cuda
    calls = [Trusted(0.4454 + 0.3, None, None) for _ in range(50)]
    nulls = [Trusted(0.01 + 0.3, None, None) for _ in range(10)]
    assert cross_check([0.126] * 50, calls, NULL_MS, nulls, "cuda")["tampered"] is None
    assert (
        cross_check([0.126] * 50, _calls(0.01, 50), NULL_MS, [Trusted(0.2, None, None)] * 10, "cuda")["tampered"]
        is None
    )
    # a reported time longer than the round trip around it is impossible on any backend
    assert cross_check([0.5] * 50, [Trusted(0.4, None, None)] * 50, NULL_MS, nulls, "cuda")["tampered"]


def test_cpu_time_between_calls_is_background_work() -> None:
    busy = [Trusted(1.0, 0.3, 0.08) for _ in range(50)]
    assert idle_check(busy, 0.1, "cpu") and "between calls" in str(idle_check(busy, 0.1, "cpu"))
    assert idle_check(_calls(0.1, 50), 0.1, "cpu") is None
    # an honest cuda worker's own cleanup between calls (p26 on the H200: 0.08-0.1 ms), and more is caught
    assert idle_check([Trusted(1.0, 0.3, 0.098)] * 50, 0.05, "cuda") is None
    assert idle_check([Trusted(1.0, 0.3, 0.5)] * 50, 0.05, "cuda")


def test_cuda_idle_cpu_is_judged_against_the_eager_reference_workers() -> None:
    """Blocks of six 600 MB staged arenas (honest p01 decode kernels on the H200, 2026-12-02): 0.28-0.29 ms of CPU a
    call between blocks, over the 0.25 ms floor. The eager reference's worker waits through the same blocks: its
    idle sets the line, and a worker using far more than it is still caught."""
    honest = [Trusted(0.4, 0.8, 0.29, 13.0)] * 50
    assert idle_check(honest, 0.37, "cuda")  # the floor alone
    assert idle_check(honest, 0.37, "cuda", reference=[0.2] * 75) is None
    figures = idle_figures(honest, 0.37, "cuda", reference=[0.2] * 75)
    assert figures == {"median_ms": 0.29, "limit_ms": 0.4, "reference_ms": 0.2, "cpu_share": 0.29 / 13.0}
    assert "eager reference" in str(idle_check([Trusted(0.4, 0.8, 0.9)] * 50, 0.37, "cuda", reference=[0.2] * 75))


def test_device_work_after_the_timed_stream_is_caught_at_any_duration() -> None:
    null_pending = [0.003, 0.0031, 0.0029, 0.003] * 3
    assert pending_check([0.013] * 50, null_pending, 0.0013)  # a 10 us kernel on a side stream, 1.3 us call
    assert pending_check([0.0032] * 50, null_pending, 0.0013) is None
    # honest multi-launch calls of several ms on the H200 leave 12-76 us there: a small share of the call
    assert pending_check([0.0684] * 50, [0.0079] * 12, 58.2) is None
    assert pending_check([0.0275] * 50, [0.0144] * 12, 46.5) is None
    # a tail over 5% of a 1 ms call is still caught
    assert pending_check([0.07] * 50, [0.0079] * 12, 1.0)


def test_the_process_clock_counts_a_thread_that_came_and_went_between_two_readings() -> None:
    import os

    clock = ProcessClock(os.getpid())
    before = clock.cpu_ns()

    def spin() -> None:  # 50 ms of its own CPU time, however busy the machine is
        start = time.thread_time()
        while time.thread_time() - start < 0.05:
            pass

    worker = threading.Thread(target=spin)
    worker.start()
    worker.join()
    after = clock.cpu_ns()
    assert before is not None and after is not None and (after - before) / 1e6 >= 50  # the thread's 50 ms


def test_null_calls_slowed_past_the_submission_s_own_calls_leave_a_negative_estimate_and_fail() -> None:
    # the submission burns CPU while the harness runs its null calls: the overhead taken off each call
    # exceeds the call, which would widen the allowance for work moved out of the timer
    slowed = _calls(3.0, 10)
    check = cross_check([0.1] * 50, _calls(0.1, 50), NULL_MS, slowed, "cpu")
    assert check["trusted_estimate_ms"] < 0 and "slowed the null calls" in check["tampered"]


def test_null_calls_far_costlier_than_the_reference_worker_s_fail_the_calibration() -> None:
    # the same harness's null calls in the eager reference's worker cost 0.3 ms of wall time each (no CPU clock)
    eager_nulls = [Trusted(round_trip_ms=0.01 + 0.3, cpu_ms=None, idle_cpu_ms=None)] * 25
    honest = [Trusted(round_trip_ms=0.01 + 0.5, cpu_ms=None, idle_cpu_ms=None)] * 10
    assert calibration_check(NULL_MS, honest, [0.01] * 25, eager_nulls) is None
    slowed = [Trusted(round_trip_ms=0.01 + 3.0, cpu_ms=None, idle_cpu_ms=None)] * 10
    assert "slowed the null calls" in (calibration_check(NULL_MS, slowed, [0.01] * 25, eager_nulls) or "")


def test_on_cpu_the_calibration_reads_the_cpu_beside_the_calling_thread_which_load_does_not_inflate() -> None:
    """CI's pool case (2 xdist workers on 2 cores): the null calls' harness overhead 0.83 ms of CPU against the eager
    reference worker's 0.12, measured at another moment, in a harness without guards (2-6x cheaper a call at the same
    moment): timing_tamper, honest. The calling thread's CPU is the harness's own steps, the same on every call; what
    a submission could add to a null call is another thread's CPU, which an idle thread does not spend however loaded
    the host."""
    loaded = [Trusted(round_trip_ms=19.7, cpu_ms=c, idle_cpu_ms=0.0, thread_cpu_ms=c - 0.002 * (i % 3))
              for i, c in enumerate([0.84 + 0.01 * (i % 3) for i in range(25)])]  # fmt: skip
    assert beside_check(loaded) is None
    # the defence holds: threads beside the calling one burning CPU during the null calls (to widen the cross-check's
    # allowance), even while the calling thread waits for them and spends less
    burnt = [Trusted(round_trip_ms=19.7, cpu_ms=0.4 + 0.01 * (i % 3), idle_cpu_ms=0.0, thread_cpu_ms=0.3)
             for i in range(25)]  # fmt: skip
    found = beside_check(burnt)
    assert found and "slowed the null calls" in found and "beside the one running the calls" in found
    # an honest setting can cause it too (a DSL runtime's spinning threads): the feedback names it
    assert "TVM_NUM_THREADS" in found
    # the bound is on the mean: a burn in a few null calls only (to widen their spread) counts whole
    few = [Trusted(1.0, 0.3 + (3.0 if i < 3 else 0.0), 0.0, thread_cpu_ms=0.3) for i in range(25)]
    assert beside_check(few)


def test_a_load_spike_on_the_null_calls_within_the_subtraction_s_precision_is_not_tampering() -> None:
    # a CI run under load: each null call cost 9.6 ms of CPU, the honest 0.1 ms calls as much, and the
    # subtraction left the median call a hair below zero (-0.1 ms): noise, not a slowed harness
    spiked_nulls = [Trusted(round_trip_ms=12.0, cpu_ms=9.6 + 0.01 * (i % 3), idle_cpu_ms=0.0) for i in range(10)]
    spiked_calls = [Trusted(round_trip_ms=12.0, cpu_ms=9.3 + 0.01 * (i % 3), idle_cpu_ms=0.0) for i in range(50)]
    check = cross_check([0.1] * 50, spiked_calls, [0.2] * 10, spiked_nulls, "cpu")
    assert -0.2 < check["trusted_estimate_ms"] < 0 and check["tampered"] is None
    # the same spike on the null calls alone still fails: they cost far more than the calls around them
    check = cross_check([0.1] * 50, _calls(0.1, 50), [0.2] * 10, spiked_nulls, "cpu")
    assert check["trusted_estimate_ms"] < check["negative_limit_ms"] and "slowed the null calls" in check["tampered"]


def _forged(share: float, kernel_ms: float = 1.0, n: int = 50) -> tuple[list[float], list[Trusted]]:
    """Calls whose every CPU time is the kernel's, a ``share`` of them reported at a hundredth of it."""
    forged = round(share * n)
    reported = [kernel_ms / 100 if i < forged else kernel_ms for i in range(n)]
    calls = [Trusted(kernel_ms + 2.0, kernel_ms + HARNESS_MS + 0.004 * (i % 3 - 1), 0.0) for i in range(n)]
    return reported, calls


def test_under_reporting_half_the_calls_fails_however_wide_their_own_spread() -> None:
    # the median excess is half the kernel and so is its MAD: judged by its own spread it always passed
    reported, calls = _forged(0.5)
    check = cross_check(reported, calls, NULL_MS, NULLS, "cpu")
    assert check["tampered"] and "puts the median call" in check["tampered"]
    assert check["standard_error_ms"] < 0.01  # the null calls' spread alone, which no call of the submission shapes


def test_under_reporting_a_third_of_the_calls_shows_in_the_upper_quartile() -> None:
    reported, calls = _forged(0.34)
    check = cross_check(reported, calls, NULL_MS, NULLS, "cpu")
    assert check["excess_median_ms"] < check["excess_limit_ms"]  # the median alone does not see it
    assert check["tampered"] and "a quarter of the calls" in check["tampered"]
    # a few calls (a tenth) under-reported leave the quartile too: not judged, and not worth anything either
    assert cross_check(*_forged(0.1), NULL_MS, NULLS, "cpu")["tampered"] is None


def test_honest_calls_whose_wall_time_waited_for_a_busy_core_pass() -> None:
    # a loaded machine: the reported (wall) times hold waits the CPU clock does not, by up to twice the kernel
    reported = [0.1 + 0.2 * (i % 7) / 6 for i in range(50)]
    check = cross_check(reported, _calls(0.1, 50), NULL_MS, NULLS, "cpu")
    assert check["tampered"] is None and check["excess_upper_ms"] <= 0.001


def _stolen(kernel_ms: float, n: int, every: int = 3) -> list[Trusted]:
    """Calls on a loaded VM: every ``every``-th one's CPU clock ran on 0.1-0.4 ms while the host held its core."""
    cpu = [
        kernel_ms + HARNESS_MS + (0.1 + 0.3 * (i % 7) / 6 if i % every == 0 else 0.004 * (i % 3 - 1)) for i in range(n)
    ]
    return [Trusted(round_trip_ms=c + 0.05, cpu_ms=c, idle_cpu_ms=0.0) for c in cpu]


def test_honest_calls_whose_cpu_clock_ran_on_while_the_host_held_the_core_pass() -> None:
    """A fifth of the null calls and two fifths of the timed calls (longer: more of them meet a spike) cost 0.1-0.4 ms
    more CPU: the timed calls' upper quartile is measured against the null calls' own spikes, which the submission
    cannot widen (their calling thread runs the harness only)."""
    reported = [0.1] * 50
    calls = _stolen(0.1, 50, every=2)[:20] + _stolen(0.1, 30, every=3)
    nulls = _stolen(0.01, 25, every=5)
    check = cross_check(reported, calls, [0.01] * 25, nulls, "cpu")
    assert check["tampered"] is None, check
    old_allowance = check["excess_limit_ms"] + 3.0 * 1.4826 * check["harness_mad_ms"]
    assert check["excess_upper_ms"] > old_allowance  # the deviations alone failed it
    # a third of the same calls under-reported (a hundredth of a 1 ms kernel): caught all the same (with the spikes
    # among the honest two thirds, by the median too)
    forged = [Trusted(c.round_trip_ms + 1.0, c.cpu_ms + 1.0, 0.0) for c in calls]
    check = cross_check([0.01 if i % 3 == 0 else 1.0 for i in range(50)], forged, [0.01] * 25, nulls, "cpu")
    assert check["tampered"], check


def _threaded(kernel_ms: float, n: int, beside_ms: float) -> list[Trusted]:
    """Calls whose thread spent ``kernel_ms`` (and the harness's time) while threads beside it spent ``beside_ms``."""
    own = [kernel_ms + HARNESS_MS + 0.004 * (i % 3 - 1) for i in range(n)]
    return [Trusted(kernel_ms + 1.5, c + beside_ms, 0.0, thread_cpu_ms=c) for c in own]


THREADED_NULLS = _threaded(0.01, 10, 0.0)


def test_an_honest_call_on_two_threads_at_once_passes_on_a_quiet_host() -> None:
    """Two launches at once (a pool's): the process spends twice the call's wall time in CPU, half of it beside the
    calling thread. The wall time is at least the calling thread's CPU time, not the process's: before the thread's
    clock was read, this was ``timing_tamper`` on a quiet host (the concur helper's pool case, 3.3 ms of CPU against
    2.2 ms reported)."""
    check = cross_check([1.0] * 50, _threaded(1.0, 50, 1.0), NULL_MS, THREADED_NULLS, "cpu")
    assert check["tampered"] is None, check
    assert abs(check["trusted_estimate_ms"] - 1.0) < 0.01


def test_a_forged_time_is_caught_whichever_threads_spent_the_cpu() -> None:
    # the work on two threads at once, 1 ms of wall time reported as 0.3 ms: the calling thread's own CPU is 1 ms
    assert cross_check([0.3] * 50, _threaded(1.0, 50, 1.0), NULL_MS, THREADED_NULLS, "cpu")["tampered"]
    # all of it on a thread beside the calling one (which waits): the wall time is at least its CPU over the cores
    assert cross_check([0.3] * 50, _threaded(0.0, 50, 2.0), NULL_MS, THREADED_NULLS, "cpu")["tampered"]
    # on the calling thread alone, 40% under-reported: as before, no parallel allowance (a tolerance of 100% would
    # have let it pass)
    check = cross_check([0.6] * 50, _threaded(1.0, 50, 0.0), NULL_MS, THREADED_NULLS, "cpu")
    assert check["tampered"] and "puts the median call" in check["tampered"]
