"""The top bar: the store, its head and the watcher's state, and the screens (click or press 1-5)."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from tui.data.watcher import StoreState

#: (mode name, label) in key order: key "1" opens the first.
SCREENS = (
    ("monitor", "Monitor"),
    ("comparisons", "Comparisons"),
    ("replay", "Replay"),
    ("skills", "Skills & Filters"),
    ("chains", "Chains"),
)


class NavBar(Static):
    DEFAULT_CSS = """
    NavBar {
        dock: top;
        height: 1;
        background: $panel;
        color: $text;
        padding: 0 1;
    }
    """

    def __init__(self, current: str) -> None:
        super().__init__()
        self.current = current

    def on_mount(self) -> None:
        self.watch(self.app, "store_state", self._show)

    def _show(self, state: StoreState) -> None:
        store = str(getattr(self.app, "store_path", ""))
        if state.problem:
            status = Content.from_markup("[b $error]⚠ $problem[/]", problem=state.problem)
        elif state.behind:
            status = Content.from_markup("[b $warning]building views: $n events to apply…[/]", n=f"{state.behind:,}")
        elif not state.synced:
            status = Content.from_markup("[$text-muted]○ syncing…[/]")
        elif state.note:  # a read-only store: nothing is written to it (the note says how its views were made)
            status = Content.from_markup("[$success]● live[/] [$warning]read-only[/]")
        else:
            status = Content.from_markup("[$success]● live[/]")
        tabs = []
        for number, (mode, label) in enumerate(SCREENS, start=1):
            style = "reverse b" if mode == self.current else "$text-muted"
            markup = f"[@click=app.goto('{mode}')][{style}] {number} $label [/][/]"
            tabs.append(Content.from_markup(markup, label=label))
        line = Content.assemble(
            Content.from_markup("[b $accent]mkbsim[/] $store · $n events · ", store=store, n=f"{state.head:,}"),
            status,
            "  ",
            *tabs,
        )
        self.update(line, layout=False)  # one docked line: a running campaign moves the head at every poll
