"""What every store screen shares: the nav bar, reloading when the store moves, background queries."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, TypeVar, cast

from textual.screen import Screen
from textual.timer import Timer
from textual.worker import get_current_worker

from tui.data.connection import open_reader
from tui.data.watcher import StoreState

if TYPE_CHECKING:
    from tui.app import MkbsimApp

Result = TypeVar("Result")
#: Shortest time between two reloads caused by the store moving (the first one is immediate).
FOLLOW_EVERY_S = 1.0


class StoreScreen(Screen[None]):
    """A screen over the store. Subclasses implement ``reload`` (re-read what they show)."""

    #: Markdown shown by `?`, above the screen's key bindings.
    HELP: ClassVar[str] = ""

    def __init__(self) -> None:
        super().__init__()
        self._stale = False
        self._loaded_head = -1
        self._followed_at = -FOLLOW_EVERY_S  # when the store last made this screen reload
        self._follow_timer: Timer | None = None

    @property
    def mkbsim(self) -> MkbsimApp:
        return cast("MkbsimApp", self.app)

    @property
    def db(self) -> sqlite3.Connection:
        """The UI thread's read connection (quick, bounded queries only)."""
        return self.mkbsim.db

    def on_mount(self) -> None:
        self.watch(self.app, "store_state", self._store_moved, init=False)
        self._loaded_head = self.mkbsim.store_state.head
        self.reload()

    def on_screen_resume(self) -> None:
        if self._stale:
            self._stale = False
            self.reload()

    def reload(self) -> None:
        raise NotImplementedError

    def _store_moved(self, state: StoreState) -> None:
        if state.head == self._loaded_head and not state.applied:
            return  # nothing this screen reads has changed
        self._loaded_head = state.head
        if not self.is_current:
            self._stale = True
            return
        # a running campaign moves the head at every poll: reload at most once a second
        wait = self._followed_at + FOLLOW_EVERY_S - time.monotonic()
        if wait <= 0:
            self._follow_store()
        elif self._follow_timer is None:
            self._follow_timer = self.set_timer(wait, self._follow_store)

    def _follow_store(self) -> None:
        self._follow_timer = None
        self._followed_at = time.monotonic()
        self.reload()

    def query_in_thread(
        self, work: Callable[[sqlite3.Connection], Result], done: Callable[[Result], None], *, group: str
    ) -> None:
        """Run ``work`` on its own connection in a worker thread, then ``done(result)`` on the UI thread.

        A newer call in the same group supersedes an older one, whose result is dropped.
        """
        path = self.mkbsim.store_path

        def job() -> None:
            worker = get_current_worker()
            try:
                conn = open_reader(path)
                try:
                    result = work(conn)
                finally:
                    conn.close()
            except sqlite3.Error as exc:
                self._deliver(worker.is_cancelled, self.notify, f"reading the store failed: {exc}", severity="error")
                return
            self._deliver(worker.is_cancelled, done, result)

        self.run_worker(job, thread=True, exclusive=True, group=group, exit_on_error=False)

    def _deliver(self, cancelled: bool, callback: Callable[..., object], *args: object, **kwargs: object) -> None:
        if cancelled:
            return
        with contextlib.suppress(RuntimeError):  # the app closed while the query ran: nobody waits for it
            self.app.call_from_thread(callback, *args, **kwargs)
