"""Monitor: the store's campaigns and, for the selected one, progress per model and arm, attempts in
flight, throughput and ETA, recent failures, and the paired-lift cells as comparisons resolve."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static

from mkbsim import lab as data
from mkbsim.lab import ARM_ORDER, LabReader
from tui import format as fmt
from tui.data.watcher import LiftUpdate
from tui.messages import ShowComparisons
from tui.screens.base import StoreScreen
from tui.widgets.key_bar import KeyBar
from tui.widgets.nav_bar import NavBar
from tui.widgets.paged_table import Column, ListSource, PagedTable

IN_FLIGHT_SHOWN = 12
#: cells a model's name gets in the monitor's tables (``fmt.model`` shortens longer names)
MODEL_CELLS = 14
FAILURES_SHOWN = 8
THROUGHPUT_WINDOW = timedelta(minutes=10)


@dataclass(frozen=True)
class MonitorView:
    """Everything the monitor shows for one campaign, read in one background query."""

    campaigns: list[data.CampaignInfo]
    selected: data.CampaignInfo | None
    progress: list[data.ArmProgress]
    in_flight: list[data.InFlight]
    failures: list[data.FailedAttempt]
    throughput: data.Throughput | None
    now: datetime


def read_view(reader: LabReader, wanted: str | None, now: datetime) -> MonitorView:
    monitor = reader.monitor
    grid = monitor.attempt_counts()
    campaigns = monitor.campaigns(grid)
    selected = next((c for c in campaigns if c.campaign_id == wanted), campaigns[0] if campaigns else None)
    if selected is None:
        return MonitorView(campaigns, None, [], [], [], None, now)
    counts = selected.counts
    return MonitorView(
        campaigns=campaigns,
        selected=selected,
        progress=data.arm_progress(selected, grid),
        in_flight=monitor.in_flight(selected.campaign_id, IN_FLIGHT_SHOWN) if counts.running else [],
        failures=monitor.recent_failures(selected.campaign_id, FAILURES_SHOWN) if counts.failed + counts.infra
        else [],
        throughput=None if selected.finished else monitor.throughput(selected, now, THROUGHPUT_WINDOW),
        now=now,
    )  # fmt: skip


def _campaign_state(c: data.CampaignInfo) -> Text:
    if c.finished:
        return Text("✓", style="green")
    if c.started_at is None:
        return Text("?", style="dim")
    return Text("●", style="bold yellow")


def _campaign_done(c: data.CampaignInfo) -> str:
    total = c.plan.total
    return f"{fmt.count(c.done)}/{fmt.count(total)}" if total else fmt.count(c.done)


CAMPAIGN_COLUMNS: list[Column[data.CampaignInfo]] = [
    Column("state", " ", 1, _campaign_state),
    Column("campaign", "Campaign", 16, lambda c: c.campaign_id, flex=True, fit=fmt.middle),
    Column("kind", "Kind", 11, lambda c: fmt.kind(c.kind)),
    Column("done", "Done", 11, _campaign_done, justify="right"),
]


class MonitorScreen(StoreScreen):
    HELP = """\
## Monitor

The campaigns in the store, newest first (● running, ✓ finished). For the highlighted campaign:
progress per model and arm (finished/planned, ✓ passed, ▶ running), attempts in flight with their
wall-clock time, agent clock and submissions used, throughput over the last ten minutes and the ETA,
the latest failures, and the paired lift per model and direction (DESIGN §6) as comparisons
resolve, with its 95% bootstrap interval and the verdict flips among them (+rescues/−breaks).
The watcher follows the store by position in a background thread; nothing here blocks typing.
"""
    #: focused as the screen is built (focusing it later would restyle the widgets focused first)
    AUTO_FOCUS = "#campaigns"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter,c", "comparisons", "Comparisons of campaign"),
        Binding("h", "harmed", "Harmed comparisons"),
        Binding("a", "all_campaigns", "Lift: all campaigns"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.selected: str | None = None
        self.lift_all = False
        #: the campaign whose view is on screen (None until the first background read is drawn)
        self.shown_campaign: str | None = None
        self._lift_for: tuple[str | None] | None = None  # the campaign the watcher computes lift for
        self._kinds: dict[str, str] = {}  # campaign id → kind, as last read

    def compose(self) -> ComposeResult:
        yield NavBar("monitor")
        with Horizontal(id="monitor-body"):
            with Vertical(id="campaigns-pane"):
                yield Static("Campaigns", classes="pane-title")
                yield PagedTable(CAMPAIGN_COLUMNS, empty_text="No campaigns yet.", id="campaigns")
                yield Static(id="failures")
            with VerticalScroll(id="campaign-pane"):
                yield Static(id="campaign-status")
                yield Static(id="progress")
                yield Static(id="in-flight")
                yield Static(id="lift")
        yield KeyBar()

    def on_mount(self) -> None:  # (Textual then runs StoreScreen's on_mount: each class's handler runs once)
        self.watch(self.app, "lift", self._show_lift)

    def reload(self) -> None:
        wanted, now = self.selected, self.mkbsim.clock()
        self.query_in_thread(lambda reader: read_view(reader, wanted, now), self._show, group="monitor")

    # -- events -------------------------------------------------------------------------------

    @on(PagedTable.Highlighted, "#campaigns")
    def _campaign_highlighted(self, event: PagedTable.Highlighted) -> None:
        campaign = event.row
        if isinstance(campaign, data.CampaignInfo) and campaign.campaign_id != self.selected:
            self.selected = campaign.campaign_id
            self._follow_lift()
            self.reload()

    def action_comparisons(self) -> None:
        self.post_message(ShowComparisons(self.selected))

    def action_harmed(self) -> None:
        self.post_message(ShowComparisons(self.selected, harmed_only=True))

    def action_all_campaigns(self) -> None:
        self.lift_all = not self.lift_all
        self._follow_lift()

    def _follow_lift(self) -> None:
        """Ask the watcher for the lift cells of the selected campaign (or of all), if not asked yet."""
        wanted = None if self.lift_all else self.selected
        if self._lift_for != (wanted,):
            self._lift_for = (wanted,)
            self.mkbsim.follow_campaign(wanted)

    # -- drawing ------------------------------------------------------------------------------

    def _show(self, view: MonitorView) -> None:
        table = self.query_one("#campaigns", PagedTable)
        ids = [c.campaign_id for c in view.campaigns]
        if view.selected is not None and self.selected is None:
            self.selected = view.selected.campaign_id
        self._follow_lift()  # after the first paint: the cells cost the watcher a second or so on big stores
        cursor = ids.index(self.selected) if self.selected in ids else 0
        table.set_source(ListSource(view.campaigns), cursor=cursor)
        self._kinds = {c.campaign_id: c.kind for c in view.campaigns}
        self.query_one("#campaign-status", Static).update(self._status(view))
        self.query_one("#progress", Static).update(self._progress(view))
        self.query_one("#in-flight", Static).update(self._in_flight(view))
        self.query_one("#failures", Static).update(self._failures(view))
        self.shown_campaign = view.selected.campaign_id if view.selected else None

    def _status(self, view: MonitorView) -> RenderableType:
        c = view.selected
        if c is None:
            return Text("No campaigns in this store yet: run one with `mkbsim run`.", style="italic")
        head = Text.assemble((c.campaign_id, "bold"), " · ", fmt.kind(c.kind))
        if c.started_at is not None:
            head.append(f" · started {c.started_at:%Y-%m-%d %H:%M:%S} UTC")
        n = c.counts
        counts = Text(
            f"{n.attempts:,} attempts: {n.passed:,} passed, {n.failed:,} failed, {n.skipped:,} skipped, "
            f"{n.infra:,} infra/interrupted, {n.running:,} running"
        )
        if c.finished_at is not None and c.started_at is not None:
            took = c.finished_at - c.started_at
            rate = c.done / max(took.total_seconds() / 60.0, 1e-9)
            state = Text(f"✓ finished after {fmt.duration(took)} ({rate:,.1f} attempts/min)", style="green")
        else:
            state = self._running_state(view)
        return Group(head, counts, state)

    def _running_state(self, view: MonitorView) -> Text:
        c, rate = view.selected, view.throughput
        assert c is not None
        text = Text("● running", style="bold yellow")
        if c.started_at is not None:
            text.append(f" for {fmt.duration(view.now - c.started_at)}", style="yellow")
        if rate is None or rate.per_minute is None:
            return text
        span = "since the start" if rate.since_start else f"over the last {fmt.duration(rate.window)}"
        text.append(f" · {rate.per_minute:,.1f} attempts/min {span}")
        if rate.eta is not None:
            text.append(f" · ETA {fmt.duration(rate.eta)}", style="bold")
        elif c.plan.total is None:
            text.append(" · ETA unknown (the config states no plan size)", style="dim")
        return text

    def _progress(self, view: MonitorView) -> RenderableType:
        """Models × arms (arms × models when there are control arms: more arms than fit across)."""
        if not view.progress:
            return Text("")
        arms = list(dict.fromkeys(p.arm for p in view.progress))
        models = list(dict.fromkeys(p.model for p in view.progress))
        cells = {(p.model, p.arm): p for p in view.progress}
        title = "Progress per model and arm: done/planned, share passed"
        table = Table(title=title, title_justify="left", expand=True, box=None, padding=(0, 1), collapse_padding=True)
        if len(arms) <= len(ARM_ORDER):
            table.add_column("model", style="bold", no_wrap=True)
            for arm in arms:
                table.add_column(fmt.arm(arm), no_wrap=True)
            for model in models:
                row = (self._progress_cell(cells.get((model, arm))) for arm in arms)
                table.add_row(fmt.model(model, MODEL_CELLS), *row)
        else:
            table.add_column("arm", style="bold", no_wrap=True)
            for model in models:
                table.add_column(fmt.model(model, MODEL_CELLS), no_wrap=True)
            for arm in arms:
                table.add_row(fmt.arm(arm), *(self._progress_cell(cells.get((m, arm))) for m in models))
        return table

    @staticmethod
    def _progress_cell(p: data.ArmProgress | None) -> Text:
        if p is None:
            return Text("·", style="dim")
        planned = f"/{fmt.count(p.planned)}" if p.planned is not None else ""
        complete = p.planned is not None and p.done >= p.planned
        text = Text(f"{fmt.count(p.done)}{planned}", style="green" if complete else "")
        scored = p.done - p.skipped - p.infra  # finished and verified
        if scored:
            text.append(f" {p.passed / scored:.0%}", style="dim")
        if p.running:
            text.append(f" ▶{p.running}", style="yellow")
        return text

    def _in_flight(self, view: MonitorView) -> RenderableType:
        running = view.selected.running if view.selected else 0
        table = Table(title=f"In flight ({running:,})", title_justify="left", expand=True, box=None, padding=(0, 1),
                      collapse_padding=True)  # fmt: skip
        for name, justify in (("attempt", "left"), ("model", "left"), ("problem", "left"), ("arm", "left"),
                              ("elapsed", "right"), ("agent", "right"), ("subs", "right")):  # fmt: skip
            table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
        for a in view.in_flight:
            elapsed = view.now - a.started_at if a.started_at else None
            limit = f"/{a.submission_limit}" if a.submission_limit is not None else ""
            table.add_row(
                fmt.short_id(a.attempt_id), fmt.model(a.model, MODEL_CELLS), a.problem, fmt.arm(a.arm),
                fmt.duration(elapsed), fmt.agent_clock(a.agent_clock_s), f"{a.submissions}{limit}",
            )  # fmt: skip
        if not view.in_flight:
            table.add_row(Text("none", style="dim"))
        return table

    def _failures(self, view: MonitorView) -> RenderableType:
        table = Table(title="Recent failures", title_justify="left", expand=True, box=None, padding=(0, 1),
                      collapse_padding=True)  # fmt: skip
        table.add_column("model", no_wrap=True)
        table.add_column("prob", no_wrap=True)
        table.add_column("arm", no_wrap=True)
        table.add_column("why", no_wrap=True, ratio=1, overflow="ellipsis")
        for f in view.failures:
            why = (f.reason or "failed") if f.status == "finished" else f"{f.status}: {f.reason or '?'}"
            table.add_row(fmt.model(f.model, 12), f.problem, fmt.arm(f.arm), Text(why, style="red"))
        if not view.failures:
            table.add_row(Text("none", style="dim"))
        return table

    def _show_lift(self, update: LiftUpdate | None) -> None:
        panel = self.query_one("#lift", Static)
        if update is None:
            panel.update(Text("Paired lift: waiting for the first comparisons…", style="dim"))
            return
        if update.campaign_id is None:
            scope = "all campaigns, plain protocol"
        else:
            kind = self._kinds.get(update.campaign_id)
            scope = update.campaign_id + (", hops pooled" if kind == "simulated_chain" else "")
        title = f"Paired lift ({scope}) · {update.resolved:,} resolved, {update.pending:,} pending"
        table = Table(title=title, title_justify="left", expand=True, box=None, padding=(0, 1), collapse_padding=True)
        table.add_column("model", no_wrap=True)
        for name in ("direction", "n", "lift", "95% CI", "help", "harm", "flips"):
            table.add_column(name, justify="left" if name == "direction" else "right", no_wrap=True)
        for row in update.rows:
            table.add_row(*self._lift_cells(row), style="bold" if row["model"] == "all" else "")
        if not update.rows:
            table.add_row(Text("no resolved comparisons yet", style="dim"))
        panel.update(table)

    @staticmethod
    def _lift_cells(row: dict[str, Any]) -> list[Text | str]:
        lo, hi = row["paired_lift_ci"]
        return [
            fmt.model(row["model"], MODEL_CELLS), fmt.DIRECTION_NAMES.get(row["direction"], row["direction"]),
            f"{row['n']:,}", fmt.lift(row["paired_lift"]), f"{lo * 100:+.1f}…{hi * 100:+.1f}%",
            f"{row['help_rate']:.0%}", f"{row['harm_rate']:.0%}",
            f"+{row['helped_verdict_change']}/−{row['harmed_verdict_change']}",
        ]  # fmt: skip
