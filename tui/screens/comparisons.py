"""Comparisons: every comparison (model, problem, direction, replicate) in a sortable, filterable table
with quick filters, a summary of the filtered set, and plots of its paired lift by family and by tier."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Input, Static
from textual_plotext import PlotextPlot

from mkbsim.lab import SORT_COLUMNS, Aggregates, ComparisonQuery, ComparisonRow, LiftBar
from tui import format as fmt
from tui.messages import OpenComparison
from tui.screens.base import StoreScreen
from tui.widgets.campaign_picker import CampaignPicker
from tui.widgets.key_bar import KeyBar
from tui.widgets.nav_bar import NavBar
from tui.widgets.paged_table import Column, KeyedSource, PagedTable


def _variant(row: ComparisonRow) -> str:
    c = row.comparison
    if c.chain_id is not None:
        return f"chain h{c.hop}"
    return c.filter or "plain"


COLUMNS: list[Column[ComparisonRow]] = [
    Column("model", "Model", 14, lambda r: r.comparison.model, flex=True, max_width=24, fit=fmt.model),
    Column("direction", "Dir", 9, lambda r: fmt.DIRECTION_NAMES.get(r.comparison.direction, r.comparison.direction)),
    Column("family", "Family", 13, lambda r: r.comparison.family),
    Column("problem", "Prob", 5, lambda r: r.comparison.problem),
    Column("replicate", "Rep", 3, lambda r: str(r.comparison.replicate), justify="right"),
    Column("baseline", "Solo", 8, lambda r: fmt.verdict(r.comparison.baseline_passed, r.comparison.baseline_speedup)),
    Column(
        "treatment", "Skill", 8, lambda r: fmt.verdict(r.comparison.treatment_passed, r.comparison.treatment_speedup)
    ),
    Column("r", "r", 5, lambda r: fmt.ratio(r.comparison.r), justify="right"),
    Column("outcome", "Outcome", 7, lambda r: fmt.outcome(r.comparison.outcome)),
    Column("verdict", "Verdict", 7, lambda r: fmt.verdict_change(r.comparison.verdict_change)),
    Column("standing", "Source", 6, lambda r: fmt.standing(r.comparison.standing)),
    Column("variant", "Variant", 10, _variant, flex=True, max_width=28, fit=fmt.middle),
]


class ComparisonsScreen(StoreScreen):
    HELP = """\
## Comparisons

One row per comparison (DESIGN §6): the target-DSL solo (Solo) against the skill-conditioned attempt
(Skill), the ratio r, the outcome (helped r ≥ 5/4, harmed r ≤ 4/5), a verdict change (rescue/break)
and where the source attempt stood (above/same/below the solo's tier). Rows are read a page at a time,
so scrolling stays fast on any store. The line above the table summarises the filtered set; the
plots show its paired lift by family and by the source attempt's tier (DESIGN §6: 0 = failed, then 1 + the
speedup thresholds 0.5×, 1×, 2×, 4× it reaches).
Enter opens the comparison in Replay. Click a header (or press `s`) to sort. `c` steps to the next
campaign; a click on the campaign box lists them.
"""
    #: focused as the screen is built (focusing it later would restyle the widgets focused first)
    AUTO_FOCUS = "#comparisons"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("h", "harmed_only", "Harmed only"),
        Binding("v", "verdict_flips", "Verdict flips"),
        Binding("a", "standing('above')", "Source above"),
        Binding("b", "standing('below')", "Source below"),
        Binding("e", "standing('same')", "Source same", show=False),
        Binding("s", "next_sort", "Sort"),
        Binding("r", "reverse_sort", "Reverse", show=False),
        Binding("c", "next_campaign", "Campaign", show=False),
        Binding("slash", "search", "Search"),
        Binding("x", "clear", "Clear filters"),
        Binding("g", "toggle_plots", "Plots"),
        Binding("escape", "focus_table", "Table", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.query_state = ComparisonQuery()
        self._rowids: list[int] = []

    def compose(self) -> ComposeResult:
        yield NavBar("comparisons")
        with Horizontal(id="comparison-filters"):
            yield CampaignPicker(id="campaign")
            yield Input(placeholder="/ search model, problem, family, direction", id="search")
        yield Static(id="quick-filters")
        yield Static(id="comparison-summary")
        yield PagedTable(COLUMNS, empty_text="No comparisons match.", id="comparisons")
        yield Horizontal(id="plots")  # the plots come with their first data (an empty plot costs as much to draw)
        yield KeyBar()

    # -- loading ------------------------------------------------------------------------------

    def reload(self) -> None:
        """Re-read the campaigns and the filtered set (its ordered rowids, then its aggregates), in threads."""
        self.query_in_thread(lambda reader: reader.comparisons.campaign_ids(), self._show_campaigns, group="campaigns")
        self._load_rows()

    def _show_campaigns(self, campaigns: list[str]) -> None:
        self.query_one("#campaign", CampaignPicker).show(self.query_state.campaign_id, campaigns)

    def _load_rows(self, *, keep_cursor: bool = True) -> None:
        """Sort and filter in a thread (an ORDER BY over every comparison); the table follows when it is done."""
        table: PagedTable[ComparisonRow] = self.query_one("#comparisons", PagedTable)
        cursor = table.cursor if keep_cursor else 0
        query = self.query_state
        self._show_quick_filters()
        # one line each, of a fixed size: updating them needs no layout
        self.query_one("#comparison-summary", Static).update(Text("sorting and filtering…", style="dim"), layout=False)
        self.query_in_thread(lambda reader: reader.comparisons.ordered_rowids(query),
                             lambda rowids: self._show_rows(query, rowids, cursor), group="rows")  # fmt: skip

    def _show_rows(self, query: ComparisonQuery, rowids: list[int], cursor: int) -> None:
        if query != self.query_state:
            return  # a newer filter or sort is on its way
        self._rowids = rowids
        table: PagedTable[ComparisonRow] = self.query_one("#comparisons", PagedTable)
        table.set_source(KeyedSource(rowids, self.lab.comparisons.fetch), cursor=cursor)
        table.set_sort_indicator(query.sort, query.descending)
        self.query_in_thread(lambda reader: reader.comparisons.aggregate(query), self._show_aggregates,
                             group="aggregates")  # fmt: skip

    def set_query(self, query: ComparisonQuery) -> None:
        if query != self.query_state:
            self.query_state = query
            self._load_rows(keep_cursor=False)

    def show_campaign(self, campaign_id: str | None, *, harmed_only: bool) -> None:
        """Filter to one campaign (from the monitor), clearing the other filters."""
        self.set_query(ComparisonQuery(campaign_id=campaign_id, harmed_only=harmed_only))
        self.query_one("#campaign", CampaignPicker).show(campaign_id)
        self.query_one("#search", Input).value = ""

    # -- actions ------------------------------------------------------------------------------

    def action_harmed_only(self) -> None:
        self.set_query(replace(self.query_state, harmed_only=not self.query_state.harmed_only))

    def action_verdict_flips(self) -> None:
        self.set_query(replace(self.query_state, verdict_flips=not self.query_state.verdict_flips))

    def action_standing(self, standing: str) -> None:
        self.set_query(replace(self.query_state, standing=None if self.query_state.standing == standing else standing))

    def action_next_sort(self) -> None:
        keys = list(SORT_COLUMNS)
        following = keys[(keys.index(self.query_state.sort) + 1) % len(keys)]
        self.set_query(replace(self.query_state, sort=following, descending=False))

    def action_reverse_sort(self) -> None:
        self.set_query(replace(self.query_state, descending=not self.query_state.descending))

    def action_next_campaign(self) -> None:
        following = self.query_one("#campaign", CampaignPicker).next_campaign()
        self.show_campaign(following, harmed_only=self.query_state.harmed_only)

    def action_search(self) -> None:
        self.query_one("#search", Input).focus()

    def action_focus_table(self) -> None:
        self.query_one("#comparisons", PagedTable).focus()

    def action_clear(self) -> None:
        self.query_one("#search", Input).value = ""
        self.set_query(ComparisonQuery(campaign_id=self.query_state.campaign_id))

    def action_toggle_plots(self) -> None:
        plots = self.query_one("#plots")
        plots.display = not plots.display

    # -- events -------------------------------------------------------------------------------

    @on(CampaignPicker.Changed, "#campaign")
    def _campaign_chosen(self, event: CampaignPicker.Changed) -> None:
        self.set_query(replace(self.query_state, campaign_id=event.campaign_id))

    @on(Input.Changed, "#search")
    def _search_changed(self, event: Input.Changed) -> None:
        self.set_query(replace(self.query_state, search=event.value))

    @on(Input.Submitted, "#search")
    def _search_done(self) -> None:
        self.action_focus_table()

    @on(PagedTable.HeaderClicked, "#comparisons")
    def _header_clicked(self, event: PagedTable.HeaderClicked) -> None:
        if event.column in SORT_COLUMNS:
            self.set_query(self.query_state.sorted_by(event.column))

    @on(PagedTable.Chosen, "#comparisons")
    def _chosen(self, event: PagedTable.Chosen) -> None:
        row = event.row
        if isinstance(row, ComparisonRow):
            self.post_message(OpenComparison(row.comparison.treatment_attempt_id))

    # -- drawing ------------------------------------------------------------------------------

    def _show_quick_filters(self) -> None:
        q = self.query_state

        def flag(key: str, label: str, on: bool) -> Text:
            return Text.assemble((f"[{key}] ", "bold"), (f"{'■' if on else '□'} {label}", "bold" if on else "dim"))

        sort = f"sort: {q.sort} {'▼' if q.descending else '▲'}"
        flags = [
            flag("h", "harmed only", q.harmed_only), flag("v", "verdict flips", q.verdict_flips),
            flag("a", "source above", q.standing == "above"), flag("b", "source below", q.standing == "below"),
            flag("e", "source same", q.standing == "same"), Text(sort, style="dim"),
        ]  # fmt: skip
        self.query_one("#quick-filters", Static).update(Text("  ").join(flags), layout=False)

    def _show_aggregates(self, aggregates: Aggregates) -> None:
        s = aggregates.summary
        text = Text(f"{len(self._rowids):,} comparisons shown · {s.resolved:,} resolved · paired lift ")
        text.append_text(fmt.lift(s.paired_lift))
        text.append(f" · help {fmt.percent(s.help_rate)} · harm {fmt.percent(s.harm_rate)}")
        self.query_one("#comparison-summary", Static).update(text, layout=False)
        plots = self.query_one("#plots", Horizontal)
        if not plots.children:
            plots.mount(PlotextPlot(id="by-family"), PlotextPlot(id="by-tier"))
        self._plot(self.query_one("#by-family", PlotextPlot), aggregates.by_family, "Paired lift by family (%)")
        self._plot(self.query_one("#by-tier", PlotextPlot), aggregates.by_tier, "Paired lift by source tier (%)")

    @staticmethod
    def _plot(widget: PlotextPlot, bars: list[LiftBar], title: str) -> None:
        plt = widget.plt
        plt.clear_figure()
        plt.title(title)
        labels = sorted({b.label for b in bars})
        directions = sorted({b.direction for b in bars})
        if labels:
            values = {(b.label, b.direction): b.paired_lift * 100 for b in bars}
            series = [[values.get((label, d), 0.0) for label in labels] for d in directions]
            names = [fmt.DIRECTION_NAMES.get(d, d) for d in directions]
            # plotext takes `labels` here; textual-plotext's stub names it `label`
            plt.multiple_bar([fmt.FAMILY_SHORT.get(label, label) for label in labels], series, labels=names,
                             minimum=0)  # type: ignore[call-arg]  # fmt: skip
        widget.refresh()
