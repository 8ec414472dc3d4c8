"""Live progress in the terminal: one bar per arm with its ETA and the failures so far, and for attempts that
take minutes (LLM attempts) a line as each starts and ends."""

from __future__ import annotations

from types import TracebackType
from typing import Any


class Progress:
    def __init__(self, totals: dict[str, int], title: str, enabled: bool, *, lines: bool = False) -> None:
        self._bar: Any = None
        self._tasks: dict[str, Any] = {}
        self._failed = dict.fromkeys(totals, 0)
        self._lines = enabled and lines
        if not enabled:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
        from rich.progress import Progress as Bars

        self._bar = Bars(TextColumn("[bold]{task.description:<20}"), BarColumn(), MofNCompleteColumn(),
                         TextColumn("{task.fields[failed]} failed"), TimeRemainingColumn())  # fmt: skip
        self._bar.console.print(title)
        self._tasks = {arm: self._bar.add_task(arm, total=n, failed=0) for arm, n in totals.items()}

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()

    def line(self, text: str) -> None:
        if self._lines:
            self._bar.console.print(text, highlight=False, markup=False, soft_wrap=True)

    def done(self, arm: str, passed: bool, line: str = "") -> None:
        self._failed[arm] += not passed
        if self._bar is not None:
            self._bar.update(self._tasks[arm], advance=1, failed=self._failed[arm])
        if line:
            self.line(line)
