"""The verifier's cross-check of a worker's reported call times against its own clocks."""

from __future__ import annotations

from mkbsim.verifier._timing import CPU_SLACK_MS, WALL_SLACK_MS, Calibration, cross_check

CALIBRATION = Calibration(wall_ms=0.3, cpu_ms=0.2)


def test_consistent_times_pass_even_when_the_machine_is_busy() -> None:
    reported = [0.10, 0.11, 0.09] * 10
    cpu = [t + 0.2 for t in reported]
    trips = [t + 1.5 for t in reported]  # long scheduling waits: not the worker's work
    check = cross_check(reported, trips, cpu, CALIBRATION)
    assert check["tampered"] is None and check["method"] == "cpu"
    assert abs(check["overhead_median_ms"] - 0.2) < 1e-9


def test_a_call_longer_than_its_round_trip_is_impossible() -> None:
    check = cross_check([0.1, 0.5], [0.4, 0.4], [0.3, 0.3], CALIBRATION)
    assert check["tampered"] and "exceed" in check["tampered"]


def test_under_reported_calls_show_up_as_cpu_time() -> None:
    # The kernel really runs 2 ms on the worker's main thread; the worker claims 0.01 ms.
    reported = [0.01] * 50
    check = cross_check(reported, [2.4] * 50, [2.2] * 50, CALIBRATION)
    assert check["tampered"] and "reference shows 0.200 ms" in check["tampered"]
    near = cross_check([1.0] * 50, [1.5] * 50, [1.2 + CPU_SLACK_MS * 0.9] * 50, CALIBRATION)
    assert near["tampered"] is None


def test_without_cpu_times_the_wall_clock_decides_loosely() -> None:
    reported = [0.01] * 50
    check = cross_check(reported, [5.0] * 50, [None] * 50, Calibration(wall_ms=0.3, cpu_ms=None))
    assert check["method"] == "wall" and check["tampered"]
    noisy = cross_check(reported, [0.31 + WALL_SLACK_MS * 0.9] * 50, [None] * 50, Calibration(wall_ms=0.3, cpu_ms=None))
    assert noisy["tampered"] is None


def test_a_reference_that_lost_cpu_time_does_not_make_the_limit_negative() -> None:
    # Long calls on a busy machine: CPU time below wall time, for the reference and the submission.
    check = cross_check([19.0] * 50, [20.0] * 50, [15.6] * 50, Calibration(wall_ms=0.6, cpu_ms=-5.4))
    assert check["tampered"] is None and check["overhead_limit_ms"] == CPU_SLACK_MS
