"""The device the analytic runtime model runs on: peak rates from the verifier's device profiles
(``mkbsim/verifier/devices.json``, one source of truth for speed of light) plus the host-side
dispatch costs of design.toml, which the verifier does not need."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from mkbsim.errors import UserError


@dataclass(frozen=True)
class DeviceProfile:
    key: str
    bandwidth: float  # bytes/s
    peak: dict[str, float]  # FLOP class -> FLOP/s
    eager_op_s: float  # one eager PyTorch op: Python dispatch plus launch
    kernel_launch_s: float  # launching a compiled kernel, before DSL-specific argument handling
    call_s: float  # fixed cost of every timed call, eager reference included


@cache
def load_device(key: str = "h200") -> DeviceProfile:
    from mkbsim.simulator._design import design_data
    from mkbsim.verifier._devices import profiles

    table = profiles()
    if key not in table:
        raise UserError(f"unknown device profile {key!r} (known: {', '.join(sorted(table))})")
    dispatch = design_data()["dispatch"]
    return DeviceProfile(
        key=key,
        bandwidth=float(table[key]["bandwidth_bytes_per_s"]),
        peak={cls: float(rate) for cls, rate in table[key]["peak_flops_per_s"].items()},
        eager_op_s=dispatch["eager_op_us"] * 1e-6,
        kernel_launch_s=dispatch["kernel_launch_us"] * 1e-6,
        call_s=dispatch["call_us"] * 1e-6,
    )
