"""What the app shows when the store cannot be used, or has no events yet."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Center, Middle
from textual.screen import Screen
from textual.widgets import Static

from tui.data.watcher import StoreState
from tui.widgets.key_bar import KeyBar

if TYPE_CHECKING:
    from tui.app import MkbsimApp


class StoreProblemScreen(Screen[None]):
    """The store path is missing, not a store, unreadable, damaged or too new: say so, with what to do. The
    watcher keeps trying: a store created at the path later opens by itself."""

    HELP = (
        "## No store\n\nThe path given with `--store` cannot be opened as an event store; the message says why. "
        "A store created there later (`mkbsim run --store PATH`) opens by itself."
    )
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q,escape", "app.quit", "Quit")]

    def __init__(self, path: str, problem: str) -> None:
        super().__init__()
        self.path = path
        self.problem = problem

    def compose(self) -> ComposeResult:
        with Middle(), Center():
            yield Static(self._text(), classes="notice")
        yield KeyBar()

    def on_mount(self) -> None:
        self.watch(self.app, "store_state", self._store_moved, init=False)

    def _store_moved(self, state: StoreState) -> None:
        if state.problem is not None and state.problem != self.problem:
            self.problem = state.problem
            self.query_one(Static).update(self._text())

    def _text(self) -> Text:
        return Text.assemble(
            ("Cannot open the event store\n\n", "bold red"),
            (self.problem, "bold"),
            "\n\nCheck the path given with --store (default ./events.sqlite). Create a store with "
            "`mkbsim events init --store PATH`, or fill one with `mkbsim run --store PATH`; this screen opens it "
            "as soon as it can be read.",
        )


class OpeningScreen(Screen[None]):
    """The store opens: its projections are being brought up to date (a rebuild on a big store takes a while)."""

    HELP = "## Opening\n\nThe views are being brought up to date with the store; the monitor opens when they are."
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q,escape", "app.quit", "Quit")]

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def compose(self) -> ComposeResult:
        with Middle(), Center():
            yield Static(self._text(0), classes="notice")
        yield KeyBar()

    def on_mount(self) -> None:
        self.watch(self.app, "store_state", self._store_moved, init=False)

    def _store_moved(self, state: StoreState) -> None:
        self.query_one(Static).update(self._text(state.behind, state.note))

    def _text(self, behind: int, note: str | None = None) -> Text:
        work = f"building the views: {behind:,} events to apply…" if behind else note or "reading the store…"
        return Text.assemble(("Opening the event store\n\n", "bold"), (self.path, "bold"), f"\n\n{work}")


class EmptyStoreScreen(Screen[None]):
    """A valid store without events: wait for the first ones (a campaign may be starting)."""

    HELP = "## Empty store\n\nThe store has no events yet; the monitor opens by itself when a campaign writes some."
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q,escape", "app.quit", "Quit")]

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def compose(self) -> ComposeResult:
        with Middle(), Center():
            yield Static(
                Text.assemble(
                    ("The event store is empty\n\n", "bold yellow"),
                    (self.path, "bold"),
                    " holds no events yet. Run a campaign into it (`mkbsim run --store ",
                    self.path,
                    "`); this screen opens the monitor as soon as the first events arrive.",
                ),
                classes="notice",
            )
        yield KeyBar()

    def on_mount(self) -> None:
        self.watch(self.app, "store_state", self._store_moved)

    def _store_moved(self, state: StoreState) -> None:
        if state.head > 0:
            app = cast("MkbsimApp", self.app)
            app.call_later(app.goto_mode, "monitor")
