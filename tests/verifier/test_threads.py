"""Which threads left alive after run() returned are working (DESIGN §5, background work): a pool's thread
idle on its queue is not, whether the call started it or not and however loaded the machine; a thread
computing, sleeping or waiting with a time limit is."""

from __future__ import annotations

import _thread
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from mkbsim.verifier._threads import DARK_CPU_US, cpu_before, dark_cpu, native_ids, working


def _burn(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(range(1000))


def _started(target: Callable[..., object], *args: object) -> Iterator[int]:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    assert thread.ident is not None
    yield thread.ident


def test_a_pool_started_by_the_call_is_idle_once_its_futures_are_done() -> None:
    # the pool's threads start lazily, inside the "call"; the judgement follows right after the last result,
    # as the harness's does after run() returns (the threads may still be finishing their bookkeeping)
    for _ in range(20):
        pool = ThreadPoolExecutor(max_workers=2)
        before = set(threading._active)  # type: ignore[attr-defined]
        futures = [pool.submit(sum, range(20_000)) for _ in range(2)]
        for f in futures:
            f.result()
        new = [ident for ident in threading._active if ident not in before]  # type: ignore[attr-defined]
        assert new and working(new, started=new) == set()
        pool.shutdown()


def test_a_thread_at_work_after_the_call_is_working() -> None:
    stop = threading.Event()
    (ident,) = _started(_burn, stop)
    try:
        assert working([ident], started=[ident]) == {ident}
        assert working([ident]) == {ident}
    finally:
        stop.set()


@pytest.mark.parametrize(
    "wait",
    [
        lambda: time.sleep(0.5),
        lambda: threading.Event().wait(0.5),
    ],
    ids=["sleeping", "waiting with a time limit"],
)
def test_a_thread_that_wakes_by_itself_is_working(wait: Callable[[], object]) -> None:
    (ident,) = _started(wait)
    time.sleep(0.01)  # asleep by now
    assert working([ident], started=[ident]) == {ident}


def test_a_pool_thread_still_at_its_task_is_working() -> None:
    pool = ThreadPoolExecutor(max_workers=1)
    before = set(threading._active)  # type: ignore[attr-defined]
    pool.submit(time.sleep, 0.5)
    new = [ident for ident in threading._active if ident not in before]  # type: ignore[attr-defined]
    assert working(new, started=new) == set(new)
    pool.shutdown()


def test_a_thread_waiting_for_another_without_a_limit_is_idle() -> None:
    event = threading.Event()
    (ident,) = _started(event.wait)
    try:
        time.sleep(0.01)
        assert working([ident], started=[ident]) == set()
    finally:
        event.set()


def test_a_thread_woken_during_a_call_took_cpu_and_an_idle_one_none() -> None:
    """The clocks of every other thread around a call (correctness draws): the one the call woke moved, the one
    left waiting did not (DESIGN §5, work done by another thread)."""
    from mkbsim.verifier._threads import clocks, moved

    wake, done, never = threading.Event(), threading.Event(), threading.Event()

    def woken() -> None:
        wake.wait()
        sum(range(200_000))
        done.set()
        never.wait()  # alive when its clock is read again

    threads = [threading.Thread(target=woken, daemon=True), threading.Thread(target=never.wait, daemon=True)]
    for thread in threads:
        thread.start()
    time.sleep(0.05)  # both wait now
    before = clocks()
    assert {t.ident for t in threads} <= set(before)
    wake.set()
    done.wait()
    after = moved(before)
    assert after.get(threads[0].ident or 0, 0), after
    assert threads[1].ident not in after
    never.set()


def test_the_counting_mode_counts_a_thread_s_operators() -> None:
    import torch

    from mkbsim.verifier._threads import count_ops, enter_thread
    from mkbsim.verifier._vault import Registry

    counts: dict[int, int] = {}
    counted: dict[int, bool] = {}

    registry = Registry()

    class Mode(torch.utils._python_dispatch.TorchDispatchMode):
        __torch_dispatch__ = registry.protect(count_ops, _counts=counts, _ident=threading.get_ident)

    enter = registry.protect(
        enter_thread, _push=torch._C._push_on_torch_dispatch_stack, _mode=Mode(), _ident=threading.get_ident,
        _counted=counted,
    )  # fmt: skip
    result: list[torch.Tensor] = []
    thread = threading.Thread(target=enter, args=(lambda: result.append(torch.ones(3) * 2), (), {}))
    thread.start()
    thread.join()
    assert counted == {thread.ident: True} and counts.get(thread.ident or 0, 0) >= 2
    assert result[0].tolist() == [2.0, 2.0, 2.0]


def test_dark_cpu_counts_a_thread_that_started_and_ended_within_the_reading() -> None:
    """A thread no hook saw start, gone before the reading ends: its CPU is the process's, no live thread's."""
    done = threading.Event()

    def spin() -> None:
        end = time.thread_time() + 0.005
        while time.thread_time() < end:
            pass
        done.set()

    before = cpu_before()
    _thread.start_new_thread(spin, ())
    done.wait()
    time.sleep(0.05)  # the kernel thread exits after the event is set
    assert dark_cpu(before) > DARK_CPU_US * 1000


def test_dark_cpu_of_the_calling_thread_and_live_threads_is_none() -> None:
    """Work of the reading thread and of a thread alive at both ends is accounted for."""
    stop = threading.Event()
    worker = threading.Thread(target=lambda: [None for _ in iter(lambda: stop.is_set(), True)])
    worker.start()
    try:
        before = cpu_before()
        end = time.thread_time() + 0.005
        while time.thread_time() < end:
            pass
        assert dark_cpu(before) <= DARK_CPU_US * 1000
    finally:
        stop.set()
        worker.join()


def test_kernel_thread_ids_are_read_without_the_submission_s_thread_objects() -> None:
    """Red team rt30b F1: a ``threading.Thread`` subclass with a ``native_id`` property, idle since load; the harness
    read that property of every thread before each call's timer started and after it stopped, so the submission's
    code ran inside the harness: it found the call's inputs in the harness's frame and launched the kernel before the
    timer (a full plan at speedup 100). The ids come from each thread's CPU clock id now: the property never runs."""
    reads: list[str] = []
    ready, stop = threading.Event(), threading.Event()
    seen: dict[str, int] = {}

    class Spying(threading.Thread):
        @property  # type: ignore[override]
        def native_id(self) -> int | None:
            reads.append("native_id")
            return 0

        def run(self) -> None:
            seen["tid"] = threading.get_native_id()
            ready.set()
            stop.wait()

    spy = Spying(daemon=True)
    spy.start()
    ready.wait()
    try:
        assert spy.ident is not None
        ids = native_ids([spy.ident, threading.get_ident()])
        assert ids == {spy.ident: seen["tid"], threading.get_ident(): threading.get_native_id()}
        assert working([spy.ident], started=[spy.ident]) == set()  # idle, waiting on an event: found so
        assert reads == []
    finally:
        stop.set()
        spy.join()
