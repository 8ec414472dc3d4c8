"""Where attempts run: a local process pool or worker threads, or Ray tasks on a cluster. Each runs
``fn(arg)`` per key and hands back results as they complete (``Dispatch``); the campaign lifecycle decides
what runs. Its recorder appends through the executor (``Executor.append``): on Ray through the one writer
actor on the head node, which also serves the reads and appends of LLM attempts running on the workers
(``RemoteStore``) and holds the campaign's stop flag (``RemoteStop``)."""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from mkbsim.errors import UserError
from mkbsim.events import AppendResult, EventStore, NewEvent, RecordedEvent

#: Batches handed to the Ray writer actor and not yet appended, at most...
APPENDS_IN_FLIGHT = 8
#: ...and how long closing waits for them (a writer that hangs must not hang the run's exit).
APPEND_WAIT_S = 120.0
#: How often an attempt on a Ray worker asks the head node whether the campaign is stopping.
STOP_POLL_S = 0.5


class Dispatch(Protocol):
    def submit(self, key: str, arg: Any) -> None: ...

    def wait(self, timeout: float) -> list[tuple[str, Any]]:
        """Results completed so far (waiting up to ``timeout`` seconds for the first); raises what ``fn`` raised."""

    def close(self) -> None:
        """Stop: work not yet handed back is abandoned."""


class Executor(Dispatch, Protocol):
    def append(self, store: EventStore, events: Sequence[NewEvent]) -> None:
        """Record a batch in the store (one transaction), in order with earlier batches."""

    def appended(self) -> tuple[int, float, float]:
        """Events appended so far, and the wall and CPU seconds the store spent appending them (waits for
        pending appends)."""


def _init_worker(parent: int) -> None:
    """A pool worker: Ctrl-C is the campaign runner's to handle, and the worker dies with the runner. Forked
    workers hold both ends of their queue's pipe, so a runner killed with SIGKILL would leave them waiting."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the runner died before the line above took effect
        os._exit(1)


_PR_SET_PDEATHSIG = 1


class _AppendsHere:
    """Appends in this process (the local executors)."""

    _writer: _Writer

    def append(self, store: EventStore, events: Sequence[NewEvent]) -> None:
        self._writer.append(list(events), store)

    def appended(self) -> tuple[int, float, float]:
        return self._writer.stats()


class LocalExecutor(_AppendsHere):
    """A process pool of ``workers`` processes (forked, so they start with the loaded problem data)."""

    def __init__(self, fn: Callable[[Any], Any], workers: int) -> None:
        self._fn = fn
        context = multiprocessing.get_context("fork")
        self._pool = cf.ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker,
                                            initargs=(os.getpid(),))  # fmt: skip
        self._futures: dict[cf.Future[Any], str] = {}
        self._writer = _Writer()

    def submit(self, key: str, arg: Any) -> None:
        self._futures[self._pool.submit(self._fn, arg)] = key

    def wait(self, timeout: float) -> list[tuple[str, Any]]:
        done, _ = cf.wait(self._futures, timeout=timeout, return_when=cf.FIRST_COMPLETED)
        return [(self._futures.pop(f), f.result()) for f in done]

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._futures.clear()


class InlineDispatch(_AppendsHere):
    """Runs ``fn(arg)`` in this thread as it is submitted: a campaign simulated in memory."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self._fn = fn
        self._done: list[tuple[str, Any]] = []
        self._writer = _Writer()

    def submit(self, key: str, arg: Any) -> None:
        self._done.append((key, self._fn(arg)))

    def wait(self, timeout: float) -> list[tuple[str, Any]]:
        done, self._done = self._done, []
        return done

    def close(self) -> None:
        self._done.clear()


class ThreadDispatch(_AppendsHere):
    """``workers`` threads of this process running ``fn(arg)``: for work that mostly waits (an LLM attempt
    waits on its model, its commands and the verifier) and shares this process's store and ledger.

    Daemon threads: after a second Ctrl-C the process may exit while one still waits on a request.
    """

    def __init__(self, fn: Callable[[Any], Any], workers: int) -> None:
        self._fn = fn
        self._inbox: queue.SimpleQueue[tuple[str, Any] | None] = queue.SimpleQueue()
        self._outbox: queue.SimpleQueue[tuple[str, Any, BaseException | None]] = queue.SimpleQueue()
        self._workers = workers
        self._writer = _Writer()
        for index in range(workers):
            threading.Thread(target=self._work, name=f"attempt-{index}", daemon=True).start()

    def _work(self) -> None:
        while (item := self._inbox.get()) is not None:
            key, arg = item
            try:
                self._outbox.put((key, self._fn(arg), None))
            except BaseException as exc:  # handed to the caller of ``wait``, like a future's exception
                self._outbox.put((key, None, exc))

    def submit(self, key: str, arg: Any) -> None:
        self._inbox.put((key, arg))

    def wait(self, timeout: float) -> list[tuple[str, Any]]:
        try:
            done = [self._outbox.get(timeout=timeout)]
        except queue.Empty:
            return []
        while not self._outbox.empty():
            done.append(self._outbox.get())
        for _, _, exc in done:
            if exc is not None:
                raise exc
        return [(key, result) for key, result, _ in done]

    def close(self) -> None:
        for _ in range(self._workers):
            self._inbox.put(None)


class _Writer:
    """Appends batches and keeps count; the Ray executor's single writer actor, on the driver's node.

    As an actor it also serves the reads of attempts on Ray workers (``RemoteStore``) and holds the
    campaign's stop flag (``RemoteStop``): it is the one place on the head node every task can reach.
    """

    def __init__(self, path: str | None = None) -> None:
        self._store = EventStore(path) if path is not None else None
        self._events, self._seconds, self._cpu_seconds = 0, 0.0, 0.0
        self._stopping = False
        self._refused: Exception | None = None  # the batch the runner's stream failed at

    def append(
        self,
        events: list[NewEvent],
        store: EventStore | None = None,
        expected_version: int | Mapping[str, int] | None = None,
    ) -> AppendResult:
        target = store or self._store
        assert target is not None
        t0, c0 = time.perf_counter(), time.thread_time()
        result = target.append(events, expected_version=expected_version)
        self._events += result.appended
        self._seconds += time.perf_counter() - t0
        self._cpu_seconds += time.thread_time() - c0
        return result

    def append_pickled(self, blob: bytes) -> None:
        """The runner's batches, several queued at once: after one fails none later is appended (a later
        batch's treatments may have read the skills of the failed batch's attempts)."""
        if self._refused is not None:
            raise RuntimeError(f"an earlier batch was not appended: {self._refused}")
        try:
            self.append(pickle.loads(blob))
        except Exception as exc:
            self._refused = exc
            raise

    def read_stream(self, stream_id: str) -> list[RecordedEvent]:
        assert self._store is not None
        return self._store.read_stream(stream_id)

    def stats(self) -> tuple[int, float, float]:
        return self._events, self._seconds, self._cpu_seconds

    def request_stop(self) -> None:
        self._stopping = True

    def stopping(self) -> bool:
        return self._stopping


def connect_ray(address: str | None, cpus: int, env: Mapping[str, str] | None = None) -> Any:
    """The ``ray`` module, connected: to the cluster at ``address`` (``auto`` or ``host:port``), or else to a
    private instance on this machine with ``cpus`` CPUs (unless this process already connected). ``env``:
    variables every task and actor of this run gets (a worker has its node's environment, not ours)."""
    try:
        import ray
    except ImportError:
        raise UserError("the Ray executor needs Ray: pip install 'mkbsim[ray]'") from None
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"address": address} if address else {"num_cpus": cpus}
        if env:
            kwargs["runtime_env"] = {"env_vars": dict(env)}
        ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False, **kwargs)
    return ray


def start_writer(store_path: str) -> Any:
    """The single writer actor, on this (the head) node, appending to the store file here."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    return ray.remote(_Writer).options(num_cpus=0, scheduling_strategy=here).remote(store_path)


class RemoteStore:
    """An ``EventLog`` whose reads and appends run in the writer actor: how an attempt on a Ray worker
    records its events in the head node's store. It holds only the actor's handle, so it ships to tasks.
    A version clash raised there (``ConcurrencyError``) is raised here."""

    def __init__(self, writer: Any) -> None:
        self._writer = writer

    def read_stream(self, stream_id: str) -> list[RecordedEvent]:
        import ray

        events: list[RecordedEvent] = ray.get(self._writer.read_stream.remote(stream_id))
        return events

    def append(
        self, events: Iterable[NewEvent], *, expected_version: int | Mapping[str, int] | None = None
    ) -> AppendResult:
        import ray

        result: AppendResult = ray.get(self._writer.append.remote(list(events), None, expected_version))
        return result


class RemoteStop:
    """A ``StopFlag`` kept by the writer actor: the driver sets it, attempts on any node see it within
    ``STOP_POLL_S`` (they ask at most that often: the sandbox checks its flag many times a second)."""

    def __init__(self, writer: Any) -> None:
        self._writer = writer
        self._set = False
        self._asked = 0.0

    def set(self) -> None:
        import ray

        self._set = True
        ray.get(self._writer.request_stop.remote())

    def is_set(self) -> bool:
        if not self._set and time.monotonic() - self._asked >= STOP_POLL_S:
            import ray

            self._asked = time.monotonic()
            self._set = bool(ray.get(self._writer.stopping.remote()))
        return self._set


def _call_pickled(fn: Callable[[Any], Any], blob: bytes) -> bytes:
    return pickle.dumps(fn(pickle.loads(blob)))


class RayExecutor:
    """Attempts as Ray tasks (retried when their worker dies); events through one writer actor.

    ``address`` None starts a local Ray instance with ``workers`` CPUs; otherwise connects to that
    cluster (``auto`` or ``host:port``). The store must be a file on the machine running `mkbsim run`.
    ``writer``: an actor from ``start_writer`` that ``fn`` already records through (``RemoteStore``);
    ``task_cpus``: the CPUs Ray reserves for each task.
    """

    def __init__(
        self,
        fn: Callable[[Any], Any],
        workers: int,
        address: str | None,
        store_path: str,
        *,
        writer: Any = None,
        task_cpus: float = 1,
    ) -> None:
        ray = self._ray = connect_ray(address, workers)
        # arguments and results cross as plain pickles: much cheaper than Ray's own serialization of dataclasses
        self._task = ray.remote(max_retries=3, num_cpus=task_cpus)(_call_pickled)
        self._fn = ray.put(fn)
        self._writer: Any = writer if writer is not None else start_writer(store_path)
        self._refs: dict[Any, str] = {}
        # batches the writer has yet to append, oldest first: the writer appends them in order (one caller's
        # calls run in order on an actor) while attempts go on, and several may wait while the actor starts
        self._appending: deque[Any] = deque()

    def submit(self, key: str, arg: Any) -> None:
        self._refs[self._task.remote(self._fn, pickle.dumps(arg))] = key

    def wait(self, timeout: float) -> list[tuple[str, Any]]:
        if not self._refs:
            return []
        first, _ = self._ray.wait(list(self._refs), num_returns=1, timeout=timeout)
        if not first:
            return []
        done, _ = self._ray.wait(list(self._refs), num_returns=len(self._refs), timeout=0)
        return [(self._refs.pop(ref), pickle.loads(blob)) for ref, blob in zip(done, self._ray.get(done), strict=True)]

    def append(self, store: EventStore, events: Sequence[NewEvent]) -> None:
        self._drain(APPENDS_IN_FLIGHT - 1)  # back-pressure, and a failed append surfaces here
        self._appending.append(self._writer.append_pickled.remote(pickle.dumps(list(events))))

    def appended(self) -> tuple[int, float, float]:
        self._drain()
        stats: tuple[int, float, float] = self._ray.get(self._writer.stats.remote())
        return stats

    def _drain(self, keep: int = 0) -> None:
        while len(self._appending) > keep:
            self._ray.get(self._appending.popleft())

    def close(self) -> None:
        # the batches still queued land before the writer goes; their failure was (or will be) raised by
        # ``appended``, and raising it here would hide the error this close may be cleaning up after
        self._ray.wait(list(self._appending), num_returns=len(self._appending), timeout=APPEND_WAIT_S)
        self._appending.clear()
        for ref in self._refs:
            self._ray.cancel(ref, force=True)
        self._refs.clear()
        self._ray.kill(self._writer)
