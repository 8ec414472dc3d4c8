"""A filter test's report as a table: unfiltered vs filtered paired lift per model × direction (then per model and
pooled) on the shared comparisons, with help/harm and the paired tests' p-values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from tui import format as fmt
from tui.data.filters import FilterTestResult


def _p(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


#: (header, cell) in the order ``mkbsim filter-test`` prints them
COLUMNS: tuple[tuple[str, Callable[[dict[str, Any]], str | Text]], ...] = (
    ("model", lambda c: fmt.model(str(c["model"]), 18)),
    ("direction", lambda c: fmt.DIRECTION_NAMES.get(c["direction"], str(c["direction"]))),
    ("n", lambda c: f"{c['n']:,}"),
    ("changed", lambda c: f"{c['changed']:,}"),
    ("lift", lambda c: fmt.lift(c["lift_unfiltered"])),
    ("filtered", lambda c: fmt.lift(c["lift_filtered"])),
    ("Δ lift", lambda c: fmt.lift(c["lift_change"])),
    ("harm", lambda c: fmt.percent(c["harm_unfiltered"])),
    ("→ harm", lambda c: fmt.percent(c["harm_filtered"])),
    ("sign p", lambda c: _p(c["sign_p"])),
    ("Wilcoxon p", lambda c: _p(c["wilcoxon_p"])),
)


class FilterTestResultScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "dismiss", "Close")]
    DEFAULT_CSS = """
    FilterTestResultScreen { align: center middle; }
    FilterTestResultScreen > Vertical {
        width: 116; max-width: 98%; height: auto; max-height: 90%;
        border: thick $accent; background: $surface; padding: 0 1;
    }
    FilterTestResultScreen #filter-test-title { padding: 0 0 1 0; }
    FilterTestResultScreen DataTable { height: auto; max-height: 30; }
    """

    def __init__(self, result: FilterTestResult) -> None:
        super().__init__()
        self.result = result

    def compose(self) -> ComposeResult:
        r = self.result
        title = Text.assemble(("Filter test ", "bold"), (r.filter_name, "bold"),
                              f": campaign {r.campaign_id} (filtered) vs {r.base_campaign_id} (unfiltered), shared "
                              "comparisons. changed: comparisons whose r changed; p: paired tests on the change of "
                              "log r. Esc closes.")  # fmt: skip
        with Vertical():
            yield Static(title, id="filter-test-title")
            yield DataTable(id="filter-test-cells", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns(*(header for header, _ in COLUMNS))
        for cell in self.result.cells:
            style = "bold" if cell["model"] == "all" or cell["direction"] == "all" else ""
            table.add_row(*(Text(v, style=style) if isinstance(v := make(cell), str) else v for _, make in COLUMNS))
        if not self.result.cells:
            table.add_row(Text("no shared comparisons", style="dim"), *([""] * (len(COLUMNS) - 1)))
        table.focus()
