"""Device profiles (devices.json) and the speed-of-light estimate from a problem's cost model."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

_PROFILES = Path(__file__).with_name("devices.json")


@cache
def profiles() -> dict[str, dict[str, Any]]:
    data: dict[str, Any] = json.loads(_PROFILES.read_text())
    return {k: v for k, v in data.items() if not k.startswith("_")}


def profile_for(backend: str, device_name: str) -> tuple[str, dict[str, Any]] | None:
    """The profile for a device, or None when no profile describes it."""
    table = profiles()
    if backend == "cpu":
        return "cpu", table["cpu"]
    for key, profile in table.items():
        if any(m in device_name for m in profile["match"]):
            return key, profile
    return None


def speed_of_light(cost: Any, profile: dict[str, Any]) -> dict[str, Any]:
    """Minimum time of one call on the profiled device: the larger of moving ``cost.bytes`` at
    full bandwidth and doing ``cost.flops`` at the peak rate of each class."""
    memory_s = cost.bytes / profile["bandwidth_bytes_per_s"]
    peaks = profile["peak_flops_per_s"]
    compute_s = sum(n / peaks[cls] for cls, n in cost.flops.items())
    return {
        "bytes": int(cost.bytes),
        "flops": {k: float(v) for k, v in cost.flops.items()},
        "memory_ms": memory_s * 1e3,
        "compute_ms": compute_s * 1e3,
        "sol_ms": max(memory_s, compute_s) * 1e3,
        "bound": "memory" if memory_s >= compute_s else "compute",
    }
