"""Which of a worker's threads are working, as opposed to merely alive (DESIGN §5, background work).

A thread left alive after run() returned is background work unless it is idle: a thread pool's worker
blocked on its queue (``concurrent.futures``, kept for later compiles) is no work. The harness sleeps
briefly, releasing the GIL and the CPU to every thread that has something to do, and reads each thread's own
CPU clock (the kernel's per-thread scheduler clock) before and after: an idle thread's does not move, and an
idle thread sleeps at the end (state ``S``), where one with work is running or waiting for a core (``R``, on a
loaded machine). It looks again, a few windows, until every thread was once found so: a pool's thread still
finishing its last task when run() returned (setting its future's result, waiting for a core) is idle a
window later, where one with work never is.
A thread the call started must moreover be found where only another thread can wake it (``WAITS_FOREVER``:
a pool's worker on its queue, a condition, an event or a queue waited on with no time limit); one that
sleeps or waits with a time limit wakes by itself, with work to do. A thread started before the call is
judged by its clock alone (a library's timer thread sleeps between its rounds): work that waits out the
windows is still caught, by the output's correctness at the copy that follows and by the verifier's own
measure of the CPU the worker spends between calls (``_trusted``).

During a correctness draw no other thread may compute for the call: the audit's dispatch mode follows the calling
thread only, so an idle thread woken by run() (an event, a queue, a pool warmed at import) would work unseen.
Every thread the submission starts runs under a mode of its own from its first instruction (``enter_thread``,
through the guards' thread-start hook) that counts its torch operators (``count_ops``); a thread that ran any
during a correctness draw fails it, one that compiled a kernel (no operator) does not. A thread with a Python
thread state that carries no such mode (started by C code) may take no CPU at all during the draw (its CPU
clock, ``pthread_getcpuclockid`` of its identifier: ``clocks``/``moved``). Threads without a Python thread
state are the runtimes' own native pools (TVM's ``T.parallel`` workers, torch's intra-op threads), whose work
is the DSL launch's or an audited operator's; Python callbacks on them are refused by the guards.

Neither reading sees a thread that starts and ends within the call (C code's: ``PyGILState_Ensure`` on a thread of
its own, a library's short-lived helper): the dark-CPU reading does, without any start hook. The process's CPU
clock counts every thread's CPU, those that have ended included; the kernel threads alive at both ends of the call
account for theirs (``/proc/self/task``, each one's scheduler clock). What is left was spent by threads the call's
start did not show (``dark_cpu``): started during the call, ended or not. The clocks are read so that concurrent
work of a live thread (a spinning pool) can only lower it: the threads before the process at the start, after it at
the end.
"""

from __future__ import annotations

import inspect
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import thread as _pool
from types import CodeType
from typing import Any

# bound when the harness loads, before any submission can replace the modules' attributes
_current_frames = sys._current_frames
_get_ident = threading.get_ident
_thread_clock = time.pthread_getcpuclockid
_clock_ns = time.clock_gettime_ns
_listdir = os.listdir
_get_native_id = threading.get_native_id
_sleep = time.sleep
_PROCESS_CLOCK = time.CLOCK_PROCESS_CPUTIME_ID
_OWN_CLOCK = time.CLOCK_THREAD_CPUTIME_ID

#: The CPU threads the start of a correctness draw did not show may take in it (``dark_cpu``): honest calls read
#: a few microseconds below zero (the readings' order); starting and ending an empty thread takes more.
DARK_CPU_US = 50
#: How long the harness sleeps while the threads' clocks are read...
WINDOW_S = 0.002
#: ...at most how many times, until every thread is found idle...
WINDOWS = 5
#: ...and how much CPU a thread may take in the window it is found idle (an idle one takes none).
BUSY_NS = 20_000


def _wait_line(fn: Callable[..., object], statement: str) -> tuple[CodeType, int]:
    """The code of ``fn`` and the line of its last ``statement`` (found in the source: Python versions differ)."""
    lines, first = inspect.getsourcelines(fn)
    return fn.__code__, first + max(i for i, line in enumerate(lines) if line.strip() == statement)


#: The places where a thread waits until another wakes it, with no time limit: a pool's worker on its queue (a C
#: call, under this frame), ``Condition.wait()`` without a timeout (``Event.wait``, ``Queue.get`` and
#: ``Semaphore.acquire`` wait there). Taken from the harness's own modules when it starts, before any submission.
WAITS_FOREVER = frozenset(
    (
        _wait_line(_pool._worker, "work_item = work_queue.get(block=True)"),
        _wait_line(threading.Condition.wait, "waiter.acquire()"),
    )
)


def _clock_id(native_id: int) -> int:
    return (~native_id << 3) | 6  # MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)


def native_id(ident: int) -> int | None:
    """The kernel thread id of the live Python thread ``ident`` (its ``pthread_t``), None where it has ended: read from
    the thread's CPU clock id, which encodes it (``_clock_id``), never from a ``threading.Thread`` object. Those are
    the submission's to define: red team rt30b F1's Thread subclass had a ``native_id`` property, which the harness read
    before each call's timer started, and ran the call's kernel there (a full plan at speedup 100)."""
    try:
        return ~(_thread_clock(ident) >> 3)
    except (OSError, OverflowError, ValueError):
        return None


def native_ids(idents: Iterable[int]) -> dict[int, int | None]:
    """``native_id`` of each of ``idents``."""
    return {ident: native_id(ident) for ident in idents}


def _runnable(native_id: int) -> bool:
    try:
        with open(f"/proc/self/task/{native_id}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] == b"R"
    except (OSError, IndexError):  # the thread has ended
        return False


def _cpu_ns(clock_id: int) -> int | None:
    try:
        return _clock_ns(clock_id)
    except OSError:  # the thread has ended
        return None


def _waits_forever(ident: int) -> bool:
    frame = _current_frames().get(ident)
    return frame is not None and (frame.f_code, frame.f_lineno) in WAITS_FOREVER


def working(idents: Iterable[int], started: Iterable[int] = ()) -> set[int]:
    """The threads among ``idents`` (Python thread identifiers) not found idle in any of ``WINDOWS`` short
    windows (no CPU taken, not runnable at the end; those in ``started``, started by the call, also waiting
    where only another thread wakes them), and those whose kernel thread cannot be found."""
    native: dict[int, int] = {}
    busy: set[int] = set()
    for ident, tid in native_ids(idents).items():
        if tid is None:
            busy.add(ident)
        else:
            native[ident] = tid
    new = set(started)
    for _ in range(WINDOWS):
        if not native:
            break
        before = {ident: _cpu_ns(_clock_id(tid)) for ident, tid in native.items()}
        _sleep(WINDOW_S)
        for ident, tid in list(native.items()):
            start, end = before[ident], _cpu_ns(_clock_id(tid))
            quiet = end is not None and start is not None and end - start <= BUSY_NS and not _runnable(tid)
            if end is None or (quiet and (ident not in new or _waits_forever(ident))):  # ended, or idle
                del native[ident]
    return busy | set(native)


def clocks() -> dict[int, tuple[int, int]]:
    """Every other thread with a Python thread state: its identifier -> (its CPU clock, the clock's reading)."""
    me = _get_ident()
    found: dict[int, tuple[int, int]] = {}
    for ident in list(_current_frames()):
        if ident == me:
            continue
        try:
            clock = _thread_clock(ident)
            found[ident] = (clock, _clock_ns(clock))
        except OSError:  # it ended meanwhile
            continue
    return found


def moved(before: dict[int, tuple[int, int]]) -> dict[int, int | None]:
    """The threads of ``before`` that took CPU since (identifier -> nanoseconds), or ended (-> None): a thread
    waiting on anything takes none."""
    found: dict[int, int | None] = {}
    for ident, (clock, start) in before.items():
        try:
            spent = _clock_ns(clock) - start
        except OSError:  # ended: it woke to end, during the call
            found[ident] = None
            continue
        if spent > 0:
            found[ident] = spent
        elif spent < 0:  # its clock now names a thread started since: it ended
            found[ident] = None
    return found


def _other_tasks_cpu() -> dict[int, int]:
    """Every other kernel thread of the process (native id) -> its CPU clock's reading."""
    me = _get_native_id()
    found: dict[int, int] = {}
    for name in _listdir("/proc/self/task"):
        tid = int(name)
        if tid == me:
            continue
        try:
            found[tid] = _clock_ns(_clock_id(tid))
        except OSError:  # it ended meanwhile
            continue
    return found


def cpu_before() -> tuple[dict[int, int], int, int]:
    """The other kernel threads' CPU clocks, this thread's, then the process's (see ``dark_cpu``): this thread's is
    read next to the process's, so that the readings' own cost counts on neither side."""
    others = _other_tasks_cpu()
    mine = _clock_ns(_OWN_CLOCK)
    return others, mine, _clock_ns(_PROCESS_CLOCK)


def dark_cpu(before: tuple[dict[int, int], int, int]) -> int:
    """Nanoseconds of the process's CPU since ``before`` that the threads alive then and now do not account for."""
    process = _clock_ns(_PROCESS_CLOCK)
    mine = _clock_ns(_OWN_CLOCK)
    others, mine_before, start = before
    accounted = mine - mine_before + sum(cpu - others[tid] for tid, cpu in _other_tasks_cpu().items() if tid in others)
    return process - start - accounted


def count_ops(
    self: Any, func: Any, types: Any, args: Any = (), kwargs: Any = None, *, _counts: Any, _ident: Any
) -> Any:  # fmt: skip
    """``__torch_dispatch__`` of the mode every thread the submission starts runs under: counts its operators."""
    ident = _ident()
    _counts[ident] = _counts.get(ident, 0) + 1
    return func(*args, **(kwargs or {}))


def enter_thread(function: Any, args: Any, kwargs: Any, *, _push: Any, _mode: Any, _ident: Any, _counted: Any) -> Any:
    """The first code of every thread the submission starts: its operators are counted from now on."""
    _counted[_ident()] = True
    _push(_mode)
    return function(*args, **kwargs)
