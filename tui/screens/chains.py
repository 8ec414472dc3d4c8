"""Chains: multi-hop skill chains (A→B→A→…), each hop's outcome and comparison against the solo, and the
lineage of each claim across the hops' skills."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static

from mkbsim.lab import ChainSummary
from tui import format as fmt
from tui.data.chains import ChainDetail, chain_detail
from tui.messages import OpenComparison
from tui.screens.base import StoreScreen
from tui.widgets.key_bar import KeyBar
from tui.widgets.nav_bar import NavBar
from tui.widgets.paged_table import Column, ListSource, PagedTable
from tui.widgets.skill_view import legend


def _hop_marks(summary: ChainSummary) -> Text:
    marks = Text()
    for _, status, passed, skipped in summary.hops:
        if status == "running":
            marks.append("▶", style="yellow")
        elif skipped:
            marks.append("–", style="dim")
        elif passed:
            marks.append("✓", style="green")
        else:
            marks.append("✗", style="red")
    return marks


COLUMNS: list[Column[ChainSummary]] = [
    Column("chain", "Chain", 10, lambda s: s.chain_id.removeprefix("chain-"), fit=fmt.middle),
    Column("model", "Model", 12, lambda s: s.model, flex=True, max_width=22, fit=fmt.model),
    Column("problem", "Prob", 4, lambda s: s.problem),
    Column("hops", "Hops", 8, _hop_marks),
]


class ChainsScreen(StoreScreen):
    HELP = """\
## Chains

Multi-hop chains (`mkbsim chain --hops K`): each hop's attempt reads the previous hop's skill, A→B→A→….
For the highlighted chain: every hop's verdict, speedup and comparison against the solo of its DSL,
and each claim of the hops' skills followed across hops (● present, · absent), linked hop to hop by
word overlap; colour and tag give the claim's rubric category. A hop whose source left no skill is
skipped (–): it did not run, and its comparison is neutral (r = 1). `[` and `]` pick a hop; `o` (or Enter
on the chain) opens the hop's comparison in Replay.
"""
    #: focused as the screen is built (focusing it later would restyle the widgets focused first)
    AUTO_FOCUS = "#chains"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "open_hop", "Replay hop"),
        Binding("right_square_bracket", "hop(1)", "Next hop"),
        Binding("left_square_bracket", "hop(-1)", "Prev hop"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.detail: ChainDetail | None = None
        self.hop_cursor = 0

    def compose(self) -> ComposeResult:
        yield NavBar("chains")
        yield Static(id="chains-empty")
        with Horizontal(id="chains-body"):
            with Vertical(id="chains-pane"):
                yield Static("Chains", classes="pane-title")
                yield PagedTable(COLUMNS, empty_text="No chains.", id="chains")
            with VerticalScroll(id="chain-detail"):
                yield Static(id="chain-hops")
                yield Static(id="chain-lineage")
        yield KeyBar()

    def reload(self) -> None:
        self.query_in_thread(lambda reader: reader.chains.summaries(), self._show_chains, group="chains")

    def _show_chains(self, summaries: list[ChainSummary]) -> None:
        empty = self.query_one("#chains-empty", Static)
        empty.display = not summaries
        self.query_one("#chains-body").display = bool(summaries)
        empty.update(Text.assemble(
            ("No chains in this store. ", "bold"),
            "A chain is a run of attempts where each hop reads the previous hop's skill (A→B→A→…); "
            "create one with `mkbsim chain --hops K` and it appears here as it runs.",
        ))  # fmt: skip
        table: PagedTable[ChainSummary] = self.query_one("#chains", PagedTable)
        table.set_source(ListSource(summaries), cursor=table.cursor)

    @on(PagedTable.Highlighted, "#chains")
    def _chain_highlighted(self, event: PagedTable.Highlighted) -> None:
        summary = event.row
        if not isinstance(summary, ChainSummary):
            return
        self.query_in_thread(lambda reader: chain_detail(reader, summary), self._show_detail, group="chain-detail")

    def _show_detail(self, detail: ChainDetail) -> None:
        if self.detail is None or self.detail.summary.chain_id != detail.summary.chain_id:
            self.hop_cursor = 0
        self.detail = detail
        self._draw()

    @on(PagedTable.Chosen, "#chains")
    def _chain_chosen(self) -> None:
        self.action_open_hop()

    def action_hop(self, delta: int) -> None:
        if self.detail is not None and self.detail.hops:
            self.hop_cursor = max(0, min(len(self.detail.hops) - 1, self.hop_cursor + delta))
            # the same rows with the pointer moved: no layout; the lineage stays as it is
            self.query_one("#chain-hops", Static).update(self._hops(self.detail), layout=False)

    def action_open_hop(self) -> None:
        if self.detail is not None and self.detail.hops:
            hop = self.detail.hops[self.hop_cursor]
            if hop.r is None and hop.outcome is None:
                self.notify(f"hop {hop.hop} has no resolved comparison yet", severity="warning")
                return
            self.post_message(OpenComparison(hop.attempt_id))

    def _draw(self) -> None:
        if self.detail is None:
            return
        self.query_one("#chain-hops", Static).update(self._hops(self.detail))
        self.query_one("#chain-lineage", Static).update(self._lineage(self.detail))

    def _hops(self, detail: ChainDetail) -> RenderableType:
        s = detail.summary
        table = Table(title=f"Chain {s.chain_id} · {s.model} · {s.problem} · {s.campaign_id}", title_justify="left",
                      expand=True, box=None, padding=(0, 1))  # fmt: skip
        for name in ("", "hop", "DSL", "attempt", "verdict", "r", "outcome"):
            table.add_column(name, no_wrap=True)
        for i, hop in enumerate(detail.hops):
            pointer = Text("▶", style="bold") if i == self.hop_cursor else Text(" ")
            if hop.skipped:  # its source left no skill: it did not run, and inherits the solo's outcome
                verdict, outcome = Text("– skipped", style="dim"), Text("skipped (no skill)", style="dim")
            else:
                verdict = fmt.verdict(hop.passed, hop.speedup, resolved=hop.status != "running")
                outcome = fmt.outcome(hop.outcome) if hop.hop else Text("source", style="dim")
            table.add_row(pointer, str(hop.hop), fmt.DSL_NAMES.get(hop.dsl, hop.dsl), fmt.short_id(hop.attempt_id),
                          verdict, fmt.ratio(hop.r), outcome)  # fmt: skip
        return table

    @staticmethod
    def _lineage(detail: ChainDetail) -> RenderableType:
        hops = [h.hop for h in detail.hops]
        table = Table(title="Claim lineage across hops", title_justify="left", expand=True, box=None, padding=(0, 1))
        table.add_column("claim (as first written)", ratio=1, no_wrap=True, overflow="ellipsis")
        for hop in hops:
            table.add_column(str(hop), justify="center", no_wrap=True)
        for lineage in detail.lineages:
            first = lineage.sentences[lineage.first_hop]
            claim = Text.assemble(fmt.category_tag(lineage.category), " ", first.text)
            table.add_row(claim, *(Text("●", style="bold") if h in lineage.sentences else Text("·", style="dim")
                                   for h in hops))  # fmt: skip
        if not detail.lineages:
            table.add_row(Text("no skills written along this chain yet", style="dim"))
        return Group(table, Text(""), legend())
