"""Timers captured before any candidate code exists, cache flushing, and the verifier's
cross-check of the times a worker reports against its own clock."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

# Captured when the harness is imported (in the zygote, long before a submission is loaded): a
# submission that replaces time.perf_counter or torch.cuda.Event changes nothing the harness uses.
_perf_counter = time.perf_counter
_CudaEvent = torch.cuda.Event
_event_record = torch.cuda.Event.record
_event_elapsed = torch.cuda.Event.elapsed_time
_event_synchronize = torch.cuda.Event.synchronize
_device_synchronize = torch.cuda.synchronize
_current_stream = torch.cuda.current_stream

#: Attributes whose identity the harness checks after every call: replacing one is tampering.
TIMER_ATTRIBUTES: tuple[tuple[Any, str], ...] = (
    (time, "perf_counter"),
    (time, "perf_counter_ns"),
    (time, "monotonic"),
    (time, "monotonic_ns"),
    (time, "time"),
    (time, "time_ns"),
    (time, "process_time"),
    (torch.cuda, "Event"),
    (torch.cuda, "synchronize"),
    (torch.cuda, "current_stream"),
    (torch.cuda.Event, "record"),
    (torch.cuda.Event, "elapsed_time"),
    (torch.cuda.Event, "synchronize"),
    (torch.cuda.Event, "query"),
    (torch.cuda.Stream, "synchronize"),
)


@dataclass(frozen=True)
class Measurement:
    result: Any
    ms: float  # the protocol's measure of one end-to-end call
    host_ms: float  # host wall clock around the call (equal to ms on CPU)
    pending_ms: float  # device work still running after the measured region (side streams)


class Clock:
    """End-to-end timing of one call: synchronise, record, call, synchronise."""

    def __init__(self, device_type: str, sync: str) -> None:
        self.cuda = device_type == "cuda"
        self.device_wide = sync == "device"

    def measure(self, fn: Callable[..., Any], args: Sequence[Any]) -> Measurement:
        if not self.cuda:
            t0 = _perf_counter()
            result = fn(*args)
            t1 = _perf_counter()
            ms = (t1 - t0) * 1e3
            return Measurement(result, ms, ms, 0.0)
        _device_synchronize()
        if self.device_wide:
            t0 = _perf_counter()
            result = fn(*args)
            _device_synchronize()
            host_ms = (_perf_counter() - t0) * 1e3
            return Measurement(result, host_ms, host_ms, 0.0)
        stream = _current_stream()
        start, end = _CudaEvent(enable_timing=True), _CudaEvent(enable_timing=True)
        _event_record(start, stream)
        t0 = _perf_counter()
        result = fn(*args)
        _event_record(end, stream)
        _event_synchronize(end)
        t1 = _perf_counter()
        _device_synchronize()
        pending_ms = (_perf_counter() - t1) * 1e3
        return Measurement(result, float(_event_elapsed(start, end)), (t1 - t0) * 1e3, pending_ms)

    def now(self) -> float:
        return _perf_counter()


def _cpu_llc_bytes() -> int:
    sizes = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        unit = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
        sizes.append(int(text.rstrip("KM")) * unit)
    return max(sizes, default=32 << 20)


class CacheFlusher:
    """Evicts the last-level cache between timed calls (hardened protocol): rewrites a buffer of
    twice its size, as `triton.testing.do_bench` does on GPUs."""

    def __init__(self, device: torch.device) -> None:
        if device.type == "cuda":
            l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 << 20))
            size = max(256 << 20, 2 * l2)
        else:
            size = min(max(2 * _cpu_llc_bytes(), 8 << 20), 256 << 20)
        self.bytes = size
        self.buffer = torch.empty(size, dtype=torch.uint8, device=device)

    def flush(self) -> None:
        self.buffer.add_(1)


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


#: How much more harness work per call (the worker's CPU time around a call minus the call's
#: reported time) a submission's worker may show than the trusted reference worker before its
#: reported times are called inconsistent with the verifier's clocks. CPU time does not count the
#: waits of a busy machine, so the margin can be small; the wall-clock fallback (for kernels that
#: do not report per-thread CPU time) must absorb scheduling delays and is far looser. The check is
#: a backstop against a subverted harness that under-reports; the in-process guards come first.
CPU_SLACK_MS = 1.0  # 0.25 ms failed correct kernels on a machine loaded 4x past its cores
WALL_SLACK_MS = 2.0


@dataclass(frozen=True)
class Calibration:
    """The reference worker's median overheads per call: wall round trip and main-thread CPU time."""

    wall_ms: float
    cpu_ms: float | None


def overheads(measure_ms: Sequence[float | None], reported_ms: Sequence[float]) -> list[float] | None:
    if any(m is None for m in measure_ms):
        return None
    return [float(m) - t for m, t in zip(measure_ms, reported_ms, strict=True) if m is not None]


def cross_check(
    reported_ms: Sequence[float],
    round_trip_ms: Sequence[float],
    cpu_ms: Sequence[float | None],
    calibration: Calibration,
) -> dict[str, Any]:
    """Compare a worker's reported call times with the verifier's clocks around them.

    A call cannot take longer than the round trip that contains it; and the worker's CPU time
    around each call minus the reported time (the harness's own work) must be about what the
    trusted reference worker showed. A worker that under-reports its calls shows more.
    Returns the figures and, under ``tampered``, the reason when the times are inconsistent.
    """
    result: dict[str, Any] = {"tampered": None, "calibration": vars(calibration)}
    impossible = sum(1 for rt, t in zip(round_trip_ms, reported_ms, strict=True) if t < 0 or t > rt)
    if impossible:
        result["tampered"] = f"{impossible} reported call times exceed the verifier's round trip around them"
        return result
    cpu_over = overheads(cpu_ms, reported_ms)
    if cpu_over and calibration.cpu_ms is not None:
        method, over, base, slack = "cpu", cpu_over, calibration.cpu_ms, CPU_SLACK_MS
    else:
        method, over, base, slack = (
            "wall",
            overheads(round_trip_ms, reported_ms) or [0.0],
            calibration.wall_ms,
            WALL_SLACK_MS,
        )
    # A long call can lose CPU time to other processes, making the reference's CPU overhead
    # negative; that only ever favours the submission, so the base is never below zero.
    base = max(base, 0.0)
    limit = base + max(slack, base)
    result.update(method=method, overhead_median_ms=median(over), overhead_limit_ms=limit)
    if median(over) > limit:
        result["tampered"] = (
            f"the verifier's {method} clock sees {median(over):.3f} ms per call that the reported times do not "
            f"account for (the reference shows {base:.3f} ms)"
        )
    return result
