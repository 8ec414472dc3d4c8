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


#: the version nibble and the 12-bit counter as text, and a hex digit's variant form (``10xx``), made once
_COUNTERS = [f"7{i:03x}" for i in range(0x1000)]
_VARIANT = {d: "89ab"[int(d, 16) & 3] for d in "0123456789abcdef"}


def new_event_ids(n: int) -> list[str]:
    """``n`` increasing UUIDv7 strings under one lock and one clock read (batch appends). The random tail
    comes as one block of bytes for the batch, so an id costs a few slices and one format."""
    global _last_ms, _seq
    out = []
    tail = _rng.randbytes(8 * n).hex()
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms > _last_ms:
            _last_ms, _seq = ms, _rng.getrandbits(10) - 1  # random start leaves room to count up
        prefix = _prefix(_last_ms)
        for i in range(n):
            _seq += 1
            if _seq > 0xFFF:  # counter exhausted within one millisecond: borrow the next one
                _last_ms, _seq = _last_ms + 1, 0
                prefix = _prefix(_last_ms)
            r = tail[16 * i : 16 * i + 16]
            out.append(f"{prefix}{_COUNTERS[_seq]}-{_VARIANT[r[0]]}{r[1:4]}-{r[4:]}")
    return out


def _prefix(ms: int) -> str:
    h = f"{ms:012x}"
    return f"{h[:8]}-{h[8:]}-"


def reseed_after_fork() -> None:
    """Forked children must not repeat their parent's random tail."""
    global _rng
    _rng = random.Random()


os.register_at_fork(after_in_child=reseed_after_fork)
