"""Which of a worker's threads are working, as opposed to merely alive (DESIGN §5, background work).

A thread left alive after run() returned is background work only if it runs: a thread pool's worker
blocked on its queue (``concurrent.futures``, kept for later compiles) is no work. The harness sleeps
briefly, releasing the GIL and the CPU to every thread that has something to do, and reads each thread's
own CPU clock (the kernel's per-thread scheduler clock) before and after: an idle thread's does not move,
and at the end an idle thread sleeps, where one with work is running or waiting for a core (state ``R``,
on a loaded machine).
Work that waits out the window (a thread that sleeps, then fills the output) is still caught, by the
output's correctness at the copy that follows and by the verifier's own measure of the CPU the worker
spends between calls (``_trusted``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

#: How long the harness sleeps while the threads' clocks are read...
WINDOW_S = 0.002
#: ...and how much CPU a thread must take meanwhile to count as working (an idle one takes none).
BUSY_NS = 20_000


def _clock_id(native_id: int) -> int:
    return (~native_id << 3) | 6  # MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)


def _runnable(native_id: int) -> bool:
    try:
        with open(f"/proc/self/task/{native_id}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] == b"R"
    except (OSError, IndexError):  # the thread has ended
        return False


def _cpu_ns(clock_id: int) -> int | None:
    try:
        return time.clock_gettime_ns(clock_id)
    except OSError:  # the thread has ended
        return None


def working(idents: Iterable[int]) -> set[int]:
    """The threads among ``idents`` (Python thread identifiers) that take CPU time within a short window,
    or whose kernel thread cannot be found (counted as working)."""
    native: dict[int, int] = {}
    unknown = set()
    for ident in idents:
        thread = threading._active.get(ident)  # type: ignore[attr-defined]
        native_id = getattr(thread, "native_id", None) if thread is not None else None
        if isinstance(native_id, int):
            native[ident] = native_id
        else:
            unknown.add(ident)
    if not native:
        return unknown
    before = {ident: _cpu_ns(_clock_id(tid)) for ident, tid in native.items()}
    time.sleep(WINDOW_S)
    busy = set(unknown)
    for ident, tid in native.items():
        start, end = before[ident], _cpu_ns(_clock_id(tid))
        if (start is not None and end is not None and end - start > BUSY_NS) or _runnable(tid):
            busy.add(ident)
    return busy
