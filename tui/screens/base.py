"""What every store screen shares: the nav bar, reloading when the store moves, background queries."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, TypeVar, cast

from textual import events
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import get_current_worker

from mkbsim.errors import MkbsimError
from mkbsim.lab import LabReader
from tui.data.watcher import StoreState

if TYPE_CHECKING:
    from tui.app import MkbsimApp

Result = TypeVar("Result")
#: Shortest time between two reloads caused by the store moving (the first one is immediate).
FOLLOW_EVERY_S = 1.0


class StoreScreen(Screen[None]):
    """A screen over the store. Subclasses implement ``reload`` (re-read what they show); it runs once the
    read model is ready, and again when the store moves or the app reads through a new read model."""

    #: Markdown shown by `?`, above the screen's key bindings.
    HELP: ClassVar[str] = ""

    def __init__(self) -> None:
        super().__init__()
        self._stale = False
        self._loaded: tuple[int, int] = (-1, -1)  # (head, reader generation) last loaded
        self._followed_at = -FOLLOW_EVERY_S  # when the store last made this screen reload
        self._follow_timer: Timer | None = None
        self._resumed = False

    @property
    def mkbsim(self) -> MkbsimApp:
        return cast("MkbsimApp", self.app)

    @property
    def lab(self) -> LabReader:
        """The UI thread's reader (quick, bounded queries only)."""
        return self.mkbsim.reader

    def on_mount(self) -> None:
        self.watch(self.app, "store_state", self._store_moved, init=False)
        if self.mkbsim.store_open:
            self._loaded = (self.mkbsim.store_state.head, self.mkbsim.reader_generation)
            # shown, the screen paints first: its reads' threads would hold the GIL while it is laid out
            if self.is_current:
                self.call_after_refresh(self.reload)
            else:
                self.reload()

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        if not self._resumed:  # its widgets were styled as they mounted: restyling them all again is a wasted pass
            self._resumed = True
            event.refresh_styles = False
        if self._stale and self.mkbsim.store_open:
            self._stale = False
            self.reload()

    def on_resize(self, event: events.Resize) -> None:
        """A screen's first layout sends it a Resize of the size it was just laid out at; Textual's handler
        would lay the whole screen out again. A resize of the terminal (a new size) is handled as usual."""
        if event.size == self.outer_size:
            event.prevent_default()

    def reload(self) -> None:
        raise NotImplementedError

    def _store_moved(self, state: StoreState) -> None:
        loaded = (state.head, self.mkbsim.reader_generation)
        if not self.mkbsim.store_open or (loaded == self._loaded and not state.applied):
            return  # nothing this screen reads has changed (or nothing can be read yet)
        first = self._loaded[1] != loaded[1]
        self._loaded = loaded
        if not self.is_current:
            self._stale = True
            return
        # a running campaign moves the head at every poll: reload at most once a second
        wait = self._followed_at + FOLLOW_EVERY_S - time.monotonic()
        if wait <= 0 or first:
            self._follow_store()
        elif self._follow_timer is None:
            self._follow_timer = self.set_timer(wait, self._follow_store)

    def _follow_store(self) -> None:
        self._follow_timer = None
        self._followed_at = time.monotonic()
        self.reload()

    def query_in_thread(
        self, work: Callable[[LabReader], Result], done: Callable[[Result], None], *, group: str
    ) -> None:
        """Run ``work`` on a reader of its own in a worker thread, then ``done(result)`` on the UI thread.

        A newer call in the same group supersedes an older one, whose result is dropped.
        """
        lab = self.mkbsim.lab

        def job() -> None:
            worker = get_current_worker()
            try:
                with lab.reader() as reader:
                    result = work(reader)
            except MkbsimError as exc:
                self._deliver(worker.is_cancelled, self.notify, f"reading the store failed: {exc}", severity="error")
                return
            self._deliver(worker.is_cancelled, done, result)

        self.run_worker(job, thread=True, exclusive=True, group=group, exit_on_error=False)

    def _deliver(self, cancelled: bool, callback: Callable[..., object], *args: object, **kwargs: object) -> None:
        if cancelled:
            return
        with contextlib.suppress(RuntimeError):  # the app closed while the query ran: nobody waits for it
            self.app.call_from_thread(callback, *args, **kwargs)
