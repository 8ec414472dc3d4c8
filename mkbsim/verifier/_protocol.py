"""Measurement protocols (DESIGN §5) and the resource limits a verification runs under."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

Sync = Literal["stream", "device"]


@dataclass(frozen=True)
class Protocol:
    """Every number that decides a verdict or a timing; its hash goes into every result.

    ``paper`` is the study's protocol as published. ``hardened`` adds what the paper leaves open:
    a last-level-cache flush before every timed call, a distinct input buffer for every call (no
    address ever recurs, so a cache keyed on pointers never hits), and a device-wide
    synchronisation around each timed call (side-stream work is inside the measurement).

    ``require_full_plan`` (either protocol; off in both, as the study accepted partial plans) fails a verdict
    whose eager code made the problem's products (``partial_plan``: verifier README, "Plan kinds").
    """

    name: str
    correctness_draws: int = 5
    warmup_calls: int = 10
    timed_calls: int = 50
    rechecked_timed_calls: int = 3
    suppressed_draws: int = 1
    null_calls: int = 25  # the harness timing its own trivial function, among the timed calls (``_trusted``)
    allowance_factor: float = 3.0
    speedup_cap: float = 100.0
    cache_flush: bool = False
    unique_input_buffers: bool = False
    sync: Sync = "stream"
    require_full_plan: bool = False

    def params(self) -> dict[str, Any]:
        """The parameters that define the protocol (its name excluded). A rule added after the study's protocol is
        listed only where it is on, so a protocol without it keeps the hash its results were stored under."""
        d = asdict(self)
        del d["name"]
        for added in _ADDED_RULES:
            if not d[added]:
                del d[added]
        return d

    @property
    def hash(self) -> str:
        """Short SHA-256 of the parameters: equal hashes mean identical measurement rules."""
        blob = json.dumps(self.params(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


#: Rules added to the protocols after results were stored under their hashes (``Protocol.params``).
_ADDED_RULES = ("require_full_plan",)

PAPER = Protocol(name="paper")
HARDENED = Protocol(name="hardened", cache_flush=True, unique_input_buffers=True, sync="device")
PROTOCOLS: dict[str, Protocol] = {p.name: p for p in (PAPER, HARDENED)}


def resolve_protocol(protocol: str | Protocol, *, require_full_plan: bool = False) -> Protocol:
    """The protocol named (or given), requiring full plans where ``require_full_plan`` says so."""
    if not isinstance(protocol, Protocol):
        try:
            protocol = PROTOCOLS[protocol]
        except KeyError:
            raise ValueError(f"unknown protocol {protocol!r}; use one of {sorted(PROTOCOLS)}") from None
    return replace(protocol, require_full_plan=True) if require_full_plan else protocol


GIB = 1 << 30


@dataclass(frozen=True)
class Limits:
    """Resource limits of one submission's process; they bound damage, they are not measured.

    ``memory_bytes`` caps the worker's resident memory (a watchdog kills it above that) and, on the
    CPU backend, its address space beyond what the preloaded libraries already map.
    """

    import_timeout_s: float = 180.0
    call_timeout_s: float = 60.0
    memory_bytes: int = 8 * GIB
    file_size_bytes: int = 512 << 20
    cpu_threads: int = 1

    @classmethod
    def for_backend(cls, backend: str) -> Limits:
        if backend == "cuda":
            return cls(memory_bytes=32 * GIB)
        return cls()

    def with_(self, **changes: Any) -> Limits:
        return replace(self, **changes)
