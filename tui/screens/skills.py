"""Skills & Filters: browse the written skills, pick a skill filter, see its diff on the highlighted skill
and how many of the campaign's skills it changes, and launch a filter test (``mkbsim filter-test``)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import ClassVar

from rich.console import Group
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import OptionList, Static
from textual.worker import get_current_worker

from mkbsim.errors import MkbsimError
from mkbsim.lab import SkillRow
from tui import format as fmt
from tui.data.filters import FilterPreview, FilterTestResult, launch_filter_test, word_diff
from tui.screens.base import StoreScreen
from tui.screens.filter_test import FilterTestResultScreen
from tui.widgets.campaign_picker import CampaignPicker
from tui.widgets.key_bar import KeyBar
from tui.widgets.nav_bar import NavBar
from tui.widgets.paged_table import Column, KeyedSource, PagedTable
from tui.widgets.skill_view import SkillView

EMPTY = "No skills written yet."
_IMPACT_PROGRESS_EVERY = 250
_DIFF_STYLES = {"kept": "", "removed": "strike red", "added": "bold green"}


def _verdict(row: SkillRow) -> Text:
    if row.passed is None:
        return Text("·", style="dim")
    return Text("✓", style="green") if row.passed else Text("✗", style="red")


COLUMNS: list[Column[SkillRow]] = [
    Column("model", "Model", 12, lambda r: r.model or "?", flex=True, max_width=22, fit=fmt.model),
    Column("problem", "Prob", 4, lambda r: r.problem or "?"),
    Column("dsl", "DSL", 4, lambda r: fmt.DSL_SHORT.get(r.dsl or "", r.dsl or "?")),
    Column("arm", "Arm", 9, lambda r: fmt.arm(r.arm)),
    Column("passed", "✓", 1, _verdict),
    Column("chars", "Chars", 5, lambda r: f"{r.chars:,}", justify="right"),
]


class SkillsScreen(StoreScreen):
    HELP = """\
## Skills & Filters

The skills the attempts wrote (left), the highlighted one sentence by sentence with its rubric
category (middle), and the skill filters (right). Pick a filter to see its diff on the skill
(struck red: removed; green: added) with its reasons, and how many of the campaign's skills it
changes (counted in the background). `t` launches a filter test, a re-run of the campaign's
skill-conditioned attempts with filtered skills, and opens the Monitor to watch it; when it ends, its report
opens as a table (`r` shows it again). `c` steps to the next campaign; a click on the campaign box lists them.
"""
    #: focused as the screen is built (focusing it later would restyle the widgets focused first)
    AUTO_FOCUS = "#skills"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "focus_filters", "Filters"),
        Binding("s", "focus_skills", "Skills", show=False),
        Binding("c", "next_campaign", "Campaign"),
        Binding("t", "launch", "Launch filter test"),
        Binding("r", "last_result", "Last filter test result", show=False),
        Binding("escape", "clear_filter", "No filter", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.campaign_id: str | None = None
        self.filter_name: str | None = None
        self._text = ""
        self._impact: dict[tuple[str, str | None], tuple[int, int]] = {}
        self.last_filter_test: str | None = None  # how the last launched filter test ended
        self.last_result: FilterTestResult | None = None

    def compose(self) -> ComposeResult:
        yield NavBar("skills")
        with Horizontal(id="skills-top"):
            yield CampaignPicker(id="campaign")
            yield Static(id="filter-status")
        with Horizontal(id="skills-body"):
            yield PagedTable(COLUMNS, empty_text=EMPTY, id="skills")
            yield SkillView(id="skill-text")
            with Vertical(id="filter-pane"):
                yield Static("Filters", classes="pane-title")
                yield OptionList(id="filters")
                yield Static(id="filter-impact")
                with VerticalScroll(id="filter-diff"):
                    yield Static(id="filter-diff-body")
                yield Static(id="filter-test")
        yield KeyBar()

    def on_mount(self) -> None:
        catalog = self.mkbsim.filters
        if catalog.names():
            self.query_one("#filters", OptionList).add_options(catalog.names())
        else:
            self.query_one("#filters").display = False
            self.query_one("#filter-diff").display = False
        # (Textual then runs StoreScreen's on_mount, which reads the skills: each class's handler runs once)
        self._count_impact()
        self._show_launcher()

    def reload(self) -> None:
        """Re-read the campaigns and the chosen campaign's skills (their positions), in a thread."""
        campaign = self.campaign_id
        self.query_in_thread(lambda reader: (reader.skills.campaign_ids(), reader.skills.positions(campaign)),
                             lambda found: self._show_skills(campaign, *found), group="skills")  # fmt: skip

    def _show_skills(self, campaign: str | None, campaigns: list[str], positions: list[int]) -> None:
        self.query_one("#campaign", CampaignPicker).show(self.campaign_id, campaigns)
        if campaign != self.campaign_id:
            return  # another campaign was chosen meanwhile: its skills are on their way
        table: PagedTable[SkillRow] = self.query_one("#skills", PagedTable)
        table.empty_text = EMPTY
        table.set_source(KeyedSource(positions, self.lab.skills.rows), cursor=table.cursor)

    # -- actions ------------------------------------------------------------------------------

    def action_focus_filters(self) -> None:
        options = self.query_one("#filters", OptionList)
        if options.display:
            if options.highlighted is None:
                options.highlighted = 0
            options.focus()

    def action_focus_skills(self) -> None:
        self.query_one("#skills", PagedTable).focus()

    def action_next_campaign(self) -> None:
        self._set_campaign(self.query_one("#campaign", CampaignPicker).next_campaign())

    def action_clear_filter(self) -> None:
        self.choose_filter(None)

    def action_launch(self) -> None:
        if self.filter_name is None or self.campaign_id is None or not self.mkbsim.filters.can_launch:
            self.notify(self._launch_hint(), severity="warning")
            return
        folder = Path(tempfile.mkdtemp(prefix="mkbsim-filter-test-"))
        self._run_filter_test(self.campaign_id, self.filter_name, folder)
        self.mkbsim.goto_mode("monitor")

    def action_last_result(self) -> None:
        if self.last_result is None:
            self.notify("No filter test has finished in this session yet (t launches one).", severity="warning")
            return
        self.app.push_screen(FilterTestResultScreen(self.last_result))

    def choose_filter(self, name: str | None) -> None:
        self.filter_name = name
        self._show_preview()
        self._count_impact()
        self._show_launcher()

    # -- events -------------------------------------------------------------------------------

    @on(CampaignPicker.Changed, "#campaign")
    def _campaign_chosen(self, event: CampaignPicker.Changed) -> None:
        if event.campaign_id != self.campaign_id:
            self._set_campaign(event.campaign_id)

    @on(PagedTable.Highlighted, "#skills")
    def _skill_highlighted(self, event: PagedTable.Highlighted) -> None:
        row = event.row
        self._text = self.lab.skills.text(row.position) if isinstance(row, SkillRow) else ""
        title = f"Skill · {row.model} · {row.problem} · {fmt.arm(row.arm)}" if isinstance(
            row, SkillRow) else "Skill"  # fmt: skip
        self.query_one("#skill-text", SkillView).show_text(self._text, title=title)
        self._show_preview()

    @on(OptionList.OptionSelected, "#filters")
    def _filter_selected(self, event: OptionList.OptionSelected) -> None:
        self.choose_filter(str(event.option.prompt))

    # -- work ---------------------------------------------------------------------------------

    def _set_campaign(self, campaign_id: str | None) -> None:
        self.campaign_id = campaign_id
        self.query_one("#campaign", CampaignPicker).show(campaign_id)
        table = self.query_one("#skills", PagedTable)
        table.empty_text = "Reading the campaign's skills…"
        table.set_source(KeyedSource([], lambda keys: []))
        self.reload()
        self._count_impact()
        self._show_launcher()

    def _count_impact(self) -> None:
        name, campaign = self.filter_name, self.campaign_id
        impact = self.query_one("#filter-impact", Static)
        if not self.mkbsim.filters.names():
            unavailable = self.mkbsim.filters.unavailable or ""
            impact.update(Text.assemble(("No filters installed.\n", "bold"), (unavailable, "dim")))
            return
        if name is None:
            impact.update(Text("Pick a filter (f, then Enter) to preview it.", style="dim"))
            return
        known = self._impact.get((name, campaign))
        if known is not None:
            self._show_impact(name, campaign, known, final=True)
            return
        impact.update(Text(f"{name}: counting the skills it changes…", style="dim"))
        self._impact_worker(name, campaign)

    @work(thread=True, exclusive=True, group="impact", exit_on_error=False)
    def _impact_worker(self, name: str, campaign: str | None) -> None:
        worker = get_current_worker()
        catalog = self.mkbsim.filters
        reader = self.mkbsim.lab.reader()
        try:
            changed = total = 0
            for text in reader.skills.texts(campaign):
                if worker.is_cancelled:
                    return
                total += 1
                changed += catalog.apply(name, text).changed
                if total % _IMPACT_PROGRESS_EVERY == 0:
                    self.app.call_from_thread(self._show_impact, name, campaign, (changed, total), final=False)
        except MkbsimError as exc:
            self.app.call_from_thread(self.notify, f"reading skills failed: {exc}", severity="error")
            return
        finally:
            reader.close()
        if not worker.is_cancelled:
            self.app.call_from_thread(self._show_impact, name, campaign, (changed, total), final=True)

    def _show_impact(self, name: str, campaign: str | None, counts: tuple[int, int], *, final: bool) -> None:
        if (name, campaign) != (self.filter_name, self.campaign_id):
            return
        if final:
            self._impact[(name, campaign)] = counts
        changed, total = counts
        scope = f"campaign {campaign}" if campaign else "the store"
        text = Text.assemble((name, "bold"), f" changes {changed:,} of {total:,} skills in {scope}")
        if not final:
            text.append(" (counting…)", style="dim")
        self.query_one("#filter-impact", Static).update(text)

    def _show_preview(self) -> None:
        body = self.query_one("#filter-diff-body", Static)
        status = self.query_one("#filter-status", Static)
        if self.filter_name is None:
            installed = bool(self.mkbsim.filters.names())
            status.update(Text("No filter selected." if installed else "No filters installed.", style="dim"))
            body.update("")
            return
        preview = self.mkbsim.filters.apply(self.filter_name, self._text)
        status.update(Text.assemble("Filter ", (self.filter_name, "bold"), ": ",
                                    ("changes this skill", "bold yellow") if preview.changed else
                                    ("leaves this skill unchanged", "dim")))  # fmt: skip
        body.update(self._diff(preview))

    @staticmethod
    def _diff(preview: FilterPreview) -> Group:
        diff = Text()
        for piece in word_diff(preview.original, preview.text):
            diff.append(piece.text, style=_DIFF_STYLES[piece.kind])
        reasons = [Text(f"• {reason}", style="italic") for reason in preview.reasons]
        return Group(diff, *([Text(""), Text("Reasons", style="bold"), *reasons] if reasons else []))

    def _launch_hint(self) -> str:
        if not self.mkbsim.filters.can_launch:
            return "Launching needs `mkbsim filter-test`, which this mkbsim does not have yet."
        if self.filter_name is None:
            return "Pick a filter to launch a filter test."
        if self.campaign_id is None:
            return "Pick a campaign (c) to re-run with the filter."
        return f"t: re-run {self.campaign_id}'s skill-conditioned attempts with {self.filter_name} (filter test)."

    def _show_launcher(self) -> None:
        text = Text(self._launch_hint(), style="dim")
        if self.last_filter_test:
            text.append("\n" + self.last_filter_test)
        self.query_one("#filter-test", Static).update(text)

    @work(thread=True, group="filter-test", exit_on_error=False)
    def _run_filter_test(self, campaign_id: str, filter_name: str, folder: Path) -> None:
        result_path, log_path = folder / "report.json", folder / "progress.log"
        with result_path.open("wb") as result, log_path.open("wb") as log:
            process = launch_filter_test(self.mkbsim.store_path, campaign_id, filter_name, result, log)
            self.app.call_from_thread(
                self.notify, f"filter test {filter_name} on {campaign_id} started (pid {process.pid}, log {log_path})"
            )
            code = process.wait()
        name = f"filter test {filter_name} on {campaign_id}"
        if code == 0:
            try:
                report = FilterTestResult.parse(result_path.read_text())
            except ValueError as exc:
                self.app.call_from_thread(self._filter_test_ended, name, code, str(exc), None)
                return
            self.app.call_from_thread(self._filter_test_ended, name, code, f"{len(report.cells)} rows", report)
            return
        last = (log_path.read_text(errors="replace").strip().splitlines() or [""])[-1]
        self.app.call_from_thread(self._filter_test_ended, name, code, last, None)

    def _filter_test_ended(self, name: str, code: int, detail: str, report: FilterTestResult | None) -> None:
        self.last_filter_test = f"last {name}: exit {code}: {detail}" + (" (r shows it)" if report else "")
        if report is None:
            self.notify(self.last_filter_test, severity="error")
        else:
            self.last_result = report
            self.app.push_screen(FilterTestResultScreen(report))
        self._show_launcher()
