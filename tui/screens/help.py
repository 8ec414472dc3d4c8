"""`?`: what the current screen shows and its keys."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Markdown, Static

GLOBAL_HELP = """\
**Everywhere:** `1`–`5` switch screens (or click the tabs), `ctrl+p` opens the command palette (go to a
screen, open a comparison by model or problem), `?` shows this help, `q` quits.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "dismiss", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 90; max-width: 95%; height: auto; max-height: 90%;
        border: thick $accent; background: $surface; padding: 1 2;
    }
    HelpScreen Markdown { margin: 0; padding: 0; }
    """

    def __init__(self, screen: Screen[object]) -> None:
        super().__init__()
        self.for_screen = screen

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Markdown(getattr(self.for_screen, "HELP", "") + "\n" + GLOBAL_HELP)
            yield Static(self._keys())

    def _keys(self) -> Table:
        table = Table(title="Keys on this screen", title_justify="left", box=None, padding=(0, 2))
        table.add_column("key", style="bold", no_wrap=True)
        table.add_column("action")
        for binding in self.for_screen.BINDINGS:
            if isinstance(binding, Binding) and binding.description:
                keys = ", ".join(self.app.get_key_display(Binding(k, "")) for k in binding.key.split(","))
                table.add_row(Text(keys), binding.description)
        return table
