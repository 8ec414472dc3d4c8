"""Where attempts run: a local process pool, or Ray tasks on a cluster. Both run ``fn(arg)`` per key
and hand back results as they complete; the runner decides what runs and records every event."""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import pickle
import signal
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from mkbsim.errors import UserError
from mkbsim.events import EventStore, NewEvent


class Executor(Protocol):
    def submit(self, key: str, arg: Any) -> None: ...

    def wait(self, timeout: float) -> list[tuple[str, Any]]:
        """Results completed so far (waiting up to ``timeout`` seconds for the first)."""

    def append(self, store: EventStore, events: Sequence[NewEvent]) -> None:
        """Record a batch in the store (one transaction), in order with earlier batches."""

    def appended(self) -> tuple[int, float, float]:
        """Events appended so far, and the wall and CPU seconds the store spent appending them (waits for
        pending appends)."""

    def close(self) -> None:
        """Stop: work not yet handed back is abandoned."""


def _ignore_sigint() -> None:  # workers: Ctrl-C is the campaign runner's to handle
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class LocalExecutor:
    """A process pool of ``workers`` processes (forked, so they start with the loaded problem data)."""

    def __init__(self, fn: Callable[[Any], Any], workers: int) -> None:
        self._fn = fn
        context = multiprocessing.get_context("fork")
        self._pool = cf.ProcessPoolExecutor(workers, mp_context=context, initializer=_ignore_sigint)
        self._futures: dict[cf.Future[Any], str] = {}
        self._writer = _Writer()

    def submit(self, key: str, arg: Any) -> None:
        self._futures[self._pool.submit(self._fn, arg)] = key

    def wait(self, timeout: float) -> list[tuple[str, Any]]:
        done, _ = cf.wait(self._futures, timeout=timeout, return_when=cf.FIRST_COMPLETED)
        return [(self._futures.pop(f), f.result()) for f in done]

    def append(self, store: EventStore, events: Sequence[NewEvent]) -> None:
        self._writer.append(list(events), store)

    def appended(self) -> tuple[int, float, float]:
        return self._writer.stats()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._futures.clear()


class _Writer:
    """Appends batches and keeps count; the Ray executor's single writer actor, on the driver's node."""

    def __init__(self, path: str | None = None) -> None:
        self._store = EventStore(path) if path is not None else None
        self._events, self._seconds, self._cpu_seconds = 0, 0.0, 0.0

    def append(self, events: list[NewEvent], store: EventStore | None = None) -> None:
        target = store or self._store
        assert target is not None
        t0, c0 = time.perf_counter(), time.thread_time()
        self._events += target.append(events).appended
        self._seconds += time.perf_counter() - t0
        self._cpu_seconds += time.thread_time() - c0

    def append_pickled(self, blob: bytes) -> None:
        self.append(pickle.loads(blob))

    def stats(self) -> tuple[int, float, float]:
        return self._events, self._seconds, self._cpu_seconds


def _call_pickled(fn: Callable[[Any], Any], blob: bytes) -> bytes:
    return pickle.dumps(fn(pickle.loads(blob)))


class RayExecutor:
    """Attempts as Ray tasks (retried when their worker dies); events through one writer actor.

    ``address`` None starts a local Ray instance with ``workers`` CPUs; otherwise connects to that
    cluster (``auto`` or ``host:port``). The store must be a file on the machine running `mkbsim run`.
    """

    def __init__(self, fn: Callable[[Any], Any], workers: int, address: str | None, store_path: str) -> None:
        try:
            import ray
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        except ImportError:
            raise UserError("the Ray executor needs Ray: pip install 'mkbsim[ray]'") from None

        self._ray = ray
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"address": address} if address else {"num_cpus": workers}
            ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False, **kwargs)
        # arguments and results cross as plain pickles: much cheaper than Ray's own serialization of dataclasses
        self._task = ray.remote(max_retries=3)(_call_pickled)
        self._fn = ray.put(fn)
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        self._writer: Any = ray.remote(_Writer).options(num_cpus=0, scheduling_strategy=here).remote(store_path)
        self._refs: dict[Any, str] = {}
        self._appending: Any = None  # the batch the writer is appending while attempts go on

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
        self._drain()  # one batch in flight at a time: back-pressure, and a failed append surfaces here
        self._appending = self._writer.append_pickled.remote(pickle.dumps(list(events)))

    def appended(self) -> tuple[int, float, float]:
        self._drain()
        stats: tuple[int, float, float] = self._ray.get(self._writer.stats.remote())
        return stats

    def _drain(self) -> None:
        if self._appending is not None:
            self._ray.get(self._appending)
            self._appending = None

    def close(self) -> None:
        self._drain()
        for ref in self._refs:
            self._ray.cancel(ref, force=True)
        self._refs.clear()
        self._ray.kill(self._writer)
