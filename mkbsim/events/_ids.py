"""Time-ordered event ids (UUIDv7 layout, RFC 9562).

Time order keeps the unique index on event_id growing at its right edge: DESIGN §3 measured random
uuid4 text capping batched appends at ~52k events/s against ~261k/s for time-ordered ids.
"""

from __future__ import annotations

import os
import random
import threading
import time

_lock = threading.Lock()
_last_ms = 0
_seq = 0
_rng = random.Random()


def new_event_id() -> str:
    """A UUIDv7 string, strictly increasing within this process (12-bit sub-millisecond counter)."""
    return new_event_ids(1)[0]


def new_event_ids(n: int) -> list[str]:
    """``n`` increasing UUIDv7 strings under one lock and one clock read (batch appends)."""
    global _last_ms, _seq
    out = []
    bits = _rng.getrandbits
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms > _last_ms:
            _last_ms, _seq = ms, bits(10) - 1  # random start leaves room to count up
        for _ in range(n):
            _seq += 1
            if _seq > 0xFFF:  # counter exhausted within one millisecond: borrow the next one
                _last_ms, _seq = _last_ms + 1, 0
            h = f"{(_last_ms << 80) | (0x7 << 76) | (_seq << 64) | (0b10 << 62) | bits(62):032x}"
            out.append(f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
    return out


def reseed_after_fork() -> None:
    """Forked children must not repeat their parent's random tail."""
    global _rng
    _rng = random.Random()


os.register_at_fork(after_in_child=reseed_after_fork)
