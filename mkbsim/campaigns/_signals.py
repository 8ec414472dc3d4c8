"""Stopping a campaign cleanly on SIGINT or SIGTERM (handlers only where signals can be caught: the main thread)."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any, Protocol

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopFlag(Protocol):
    """Asks running attempts to stop: a ``threading.Event`` for worker threads, or a flag that Ray tasks
    read from the head node (``mkbsim.campaigns.RemoteStop``)."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...


class StopSignals:
    """While active, SIGINT/SIGTERM set ``caught`` (the signal's name) for a run loop to check."""

    def __init__(self) -> None:
        self.caught: str | None = None
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.caught = signal.Signals(signum).name

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            self._old = {s: signal.signal(s, self._handle) for s in STOP_SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for s, old in self._old.items():
            signal.signal(s, old)


class InterruptOnSignals(StopSignals):
    """While active, SIGINT and SIGTERM raise ``KeyboardInterrupt`` where the program is (for runs whose
    attempts block the main thread; they record the attempt in flight as interrupted on the way out)."""

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        super()._handle(signum, frame)
        raise KeyboardInterrupt(self.caught)
