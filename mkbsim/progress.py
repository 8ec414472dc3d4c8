"""Progress of long work, on stderr: stdout carries only a command's result (DESIGN §9).

A command makes one ``Progress`` and passes it to the work it calls; the work wraps each long step in
``progress.step(label, total)`` and advances it. On a terminal a step is a live bar that disappears when
the step ends; elsewhere (a log, a pipe) a step that has run for ``QUIET_S`` seconds says so in a line, and
again every ``LINE_EVERY_S`` seconds and when it ends. ``SILENT`` shows nothing (library calls, tests).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

#: A step shorter than this leaves no line in a log.
QUIET_S = 2.0
#: A long step's line in a log is repeated this often.
LINE_EVERY_S = 10.0

#: Advance a step by ``n`` units of its total.
Advance = Callable[[int], None]


def stderr_console() -> Any:
    """A rich console on stderr: bars and tables of progress go there, never to stdout."""
    from rich.console import Console

    return Console(stderr=True)


class Progress:
    def __init__(self, *, enabled: bool = True, stream: IO[str] | None = None) -> None:
        self.enabled = enabled
        self._stream = stream
        self._bars: Any = None  # one live display for every step running at once (steps nest)
        self._running = 0

    @property
    def stream(self) -> IO[str]:
        return self._stream if self._stream is not None else sys.stderr

    @contextlib.contextmanager
    def step(self, label: str, total: int | None = None) -> Iterator[Advance]:
        """One step of the work: ``label`` says what it does, ``total`` how many units it has (None: unknown)."""
        if not self.enabled:
            yield _ignore
        elif self.stream.isatty():
            with self._bar(label, total) as advance:
                yield advance
        else:
            lines = _Lines(self.stream, label, total)
            yield lines.advance
            lines.end()

    @contextlib.contextmanager
    def _bar(self, label: str, total: int | None) -> Iterator[Advance]:
        if self._bars is None:
            from rich.progress import BarColumn, MofNCompleteColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bars

            self._bars = Bars(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                              TimeElapsedColumn(), console=stderr_console(), transient=True)  # fmt: skip
        bars = self._bars
        if self._running == 0:
            bars.start()
        self._running += 1
        task = bars.add_task(label, total=total)

        def advance(n: int = 1) -> None:
            bars.advance(task, n)

        try:
            yield advance
        finally:
            bars.remove_task(task)
            self._running -= 1
            if self._running == 0:
                bars.stop()


SILENT = Progress(enabled=False)


def _ignore(n: int = 1) -> None:
    pass


class _Lines:
    """A step in a log: a line once it has run ``QUIET_S``, then every ``LINE_EVERY_S``, and at its end."""

    def __init__(self, stream: IO[str], label: str, total: int | None) -> None:
        self.stream, self.label, self.total = stream, label, total
        self.done = 0
        self.started = time.monotonic()
        self.said_at: float | None = None

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        due = self.started + QUIET_S if self.said_at is None else self.said_at + LINE_EVERY_S
        if now >= due:
            self._say(f"{self.label}: {self._count()}…")
            self.said_at = now

    def end(self) -> None:
        elapsed = time.monotonic() - self.started
        if self.said_at is not None or elapsed >= QUIET_S:
            self._say(f"{self.label}: {self._count() if self.done else 'done'} in {elapsed:.1f} s")

    def _count(self) -> str:
        return f"{self.done:,}" if self.total is None else f"{self.done:,}/{self.total:,}"

    def _say(self, line: str) -> None:
        print(line, file=self.stream, flush=True)
