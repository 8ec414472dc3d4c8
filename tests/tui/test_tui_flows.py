"""Pilot tests of the key flows: explain a harmed comparison step by step, filter and sort comparisons,
preview a skill filter, follow a store written by another process, and the bad/empty store screens."""

from __future__ import annotations

import io
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console, Group
from rich.text import Text
from textual.content import Content
from textual.widgets import OptionList, Static
from tui_pilot_kit import idle, settle, wait_for

from mkbsim.cli import main
from mkbsim.events import EventStore
from tui.app import MkbsimApp
from tui.data.filters import FilterCatalog
from tui.screens.chains import ChainsScreen
from tui.screens.comparisons import ComparisonsScreen
from tui.screens.help import HelpScreen
from tui.screens.monitor import MonitorScreen
from tui.screens.replay import ReplayScreen
from tui.screens.skills import SkillsScreen
from tui.screens.store_problem import EmptyStoreScreen, StoreProblemScreen
from tui.widgets.campaign_picker import CampaignList, CampaignPicker
from tui.widgets.key_bar import KeyBar
from tui.widgets.paged_table import PagedTable
from tui.widgets.skill_view import SkillView
from tui.widgets.trajectory import TrajectoryView

SIZE = (140, 42)
MakeApp = Callable[..., MkbsimApp]


def _static_text(widget: Static) -> str:
    """The plain text a Static shows (Rich renderables and Textual content alike)."""
    content = widget.content
    if isinstance(content, str | Content):
        return Content.from_markup(content).plain if isinstance(content, str) else content.plain
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(content)
    return console.export_text()


def _palette_shows(app: MkbsimApp, text: str) -> bool:
    """Whether the command palette's first hit contains ``text``."""
    lists = app.screen.query("CommandList")
    if not lists or not lists.first(OptionList).option_count:
        return False
    return text in str(lists.first(OptionList).get_option_at_index(0).prompt)


def _table_rows(table: PagedTable[object]) -> list[object]:
    return [table.row_at(i) for i in range(table.row_count)]


async def test_explain_a_harmed_comparison_step_by_step(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("2", "h")
        await idle(pilot)
        comparisons = app.screen
        assert isinstance(comparisons, ComparisonsScreen)
        rows = _table_rows(comparisons.query_one("#comparisons", PagedTable))
        assert rows and all(r.comparison.outcome == "harmed" for r in rows)  # type: ignore[attr-defined]
        await pilot.press("down", "enter")  # the second harmed row: a plain comparison of the demo campaign
        await idle(pilot)

        replay = app.screen
        assert isinstance(replay, ReplayScreen)
        assert replay.comparison is not None and replay.comparison.outcome == "harmed"
        assert replay.comparison.treatment_attempt_id == rows[1].comparison.treatment_attempt_id  # type: ignore[attr-defined]
        assert replay.cursor == 0
        await pilot.press("right", "right", "right", "left")
        assert replay.cursor == 2
        await pilot.press("n")
        side, index = replay.timeline[replay.cursor]
        trajectory = replay.sides[side]
        assert trajectory is not None and trajectory.events[index].type == "VerifierResult"
        assert replay.stops[0] == replay.cursor
        await pilot.press("x")
        assert index in replay.expanded[side]
        assert "protocol: paper" in replay.query(TrajectoryView)[side].text
        await pilot.press("end")
        assert replay.cursor == len(replay.timeline) - 1
        skill = _static_text(replay.query_one(SkillView).query_one(Static))
        assert "followed at" in skill
        direction = replay.comparison.direction
        await pilot.press("o")
        assert replay.comparison.direction != direction
        await pilot.press("escape")
        assert isinstance(app.screen, ComparisonsScreen)


async def test_comparison_filters_sorting_and_search_match_the_table(make_app: MakeApp, store: Path) -> None:
    conn = sqlite3.connect(store)

    def count(where: str) -> int:
        return int(conn.execute(f"SELECT COUNT(*) FROM comparisons WHERE {where}").fetchone()[0])

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await idle(pilot)
        screen = app.screen
        assert isinstance(screen, ComparisonsScreen)
        table = screen.query_one("#comparisons", PagedTable)
        assert table.row_count == count("1")
        await pilot.press("v")
        assert table.row_count == count("verdict_change IN ('rescue', 'break')")
        await pilot.press("v", "a")
        assert table.row_count == count("standing = 'above'")
        await pilot.press("b")
        assert table.row_count == count("standing = 'below'")
        await pilot.press("x", "slash", *"model-b", "enter")
        await idle(pilot)
        assert table.row_count == count("model = 'model-b'")
        assert table.has_focus
        await pilot.click(PagedTable, offset=(20, 0))  # the Model header: sort by model
        await idle(pilot)
        assert screen.query_state.sort == "model"
        await pilot.press("s")
        assert screen.query_state.sort == "direction"
        directions = [r.comparison.direction for r in _table_rows(table)]  # type: ignore[attr-defined]
        assert directions == sorted(directions)
        await pilot.press("r")
        directions = [r.comparison.direction for r in _table_rows(table)]  # type: ignore[attr-defined]
        assert directions == sorted(directions, reverse=True)


async def test_the_campaign_picker_lists_the_campaigns_and_filters_to_the_picked_one(
    make_app: MakeApp, store: Path
) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)  # the app has built the comparisons view
        conn = sqlite3.connect(store)
        campaigns = [row[0] for row in conn.execute("SELECT DISTINCT campaign_id FROM comparisons ORDER BY 1")]
        assert len(campaigns) > 1
        await pilot.press("2")
        await idle(pilot)
        screen = app.screen
        assert isinstance(screen, ComparisonsScreen)
        table = screen.query_one("#comparisons", PagedTable)
        picker = screen.query_one(CampaignPicker)
        await pilot.click(CampaignPicker)
        await idle(pilot)
        assert isinstance(app.screen, CampaignList)
        options = app.screen.query_one(OptionList)
        assert [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)] == [
            "All campaigns",
            *sorted(campaigns),
        ]
        await pilot.press("escape")  # keeps every campaign
        assert app.screen is screen and screen.query_state.campaign_id is None
        await pilot.click(CampaignPicker)
        await pilot.press("down", "down", "enter")  # the second campaign
        await idle(pilot)
        picked = sorted(campaigns)[1]
        assert app.screen is screen and screen.query_state.campaign_id == picked and picker.campaign_id == picked
        assert {r.comparison.campaign_id for r in _table_rows(table)} == {picked}  # type: ignore[attr-defined]
        await pilot.press("c")  # the next campaign, from the picked one
        await idle(pilot)
        assert picker.campaign_id == screen.query_state.campaign_id == [*sorted(campaigns), None][2]


@pytest.mark.parametrize(("key", "screen"), [("1", MonitorScreen), ("2", ComparisonsScreen), ("4", SkillsScreen),
                                            ("5", ChainsScreen)])  # fmt: skip
async def test_a_screen_reads_its_data_once_when_it_opens(
    make_app: MakeApp, monkeypatch: pytest.MonkeyPatch, key: str, screen: type[MonitorScreen]
) -> None:
    reloads: list[object] = []
    reload = screen.reload
    monkeypatch.setattr(screen, "reload", lambda self: (reloads.append(self), reload(self))[1])
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        if key != "1":
            reloads.clear()  # the monitor's own, at startup
            await pilot.press(key)
            await idle(pilot)
        assert isinstance(app.screen, screen)
        assert reloads == [app.screen]


async def test_a_resized_terminal_lays_the_screen_out_again(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await idle(pilot)
        table = app.screen.query_one(PagedTable)
        assert table.size.width == SIZE[0]
        await pilot.resize_terminal(100, 30)
        await idle(pilot)
        assert table.size.width == 100 and app.screen.outer_size == (100, 30)


async def test_filter_preview_diff_and_campaign_impact(make_app: MakeApp, store: Path) -> None:
    from tui_store_kit import drop_closures

    with EventStore(store) as events:
        texts = [e.payload["text"] for e in events.read(types=["SkillWritten"])]
    expected_changed = sum(drop_closures(t).text != t for t in texts)
    assert 0 < expected_changed < len(texts)

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await idle(pilot)
        screen = app.screen
        assert isinstance(screen, SkillsScreen)
        await pilot.press("f", "enter")
        await idle(pilot)
        assert screen.filter_name == "drop_unsupported_closure"
        impact = _static_text(screen.query_one("#filter-impact", Static))
        assert f"changes {expected_changed} of {len(texts)} skills" in impact
        # the first skill (model-a, p01, CuTe) has a closure sentence: the diff strikes it
        diff = screen.query_one("#filter-diff-body", Static).content
        assert isinstance(diff, Group) and isinstance(diff.renderables[0], Text)
        struck = [
            diff.renderables[0].plain[s.start : s.end] for s in diff.renderables[0].spans if "strike" in str(s.style)
        ]
        assert any("not worth pursuing" in piece for piece in struck)
        assert "changes this skill" in _static_text(screen.query_one("#filter-status", Static))
        # the test catalog cannot launch (as before `mkbsim filter-test` exists): `t` explains, stays here
        await pilot.press("t")
        await idle(pilot)
        assert isinstance(app.screen, SkillsScreen)
        assert "needs `mkbsim filter-test`" in _static_text(screen.query_one("#filter-test", Static))


async def test_launching_a_filter_test_runs_mkbsim_and_reports_how_it_ended(make_app: MakeApp) -> None:
    from tui_store_kit import drop_closures

    app = make_app(filters=FilterCatalog({"drop_unsupported_closure": drop_closures}, can_launch=True))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await idle(pilot)
        skills = app.screen
        assert isinstance(skills, SkillsScreen)
        await pilot.press("c", "f", "enter", "t")  # first campaign, first filter, launch
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen))
        # `mkbsim filter-test` is the subprocess; where this mkbsim lacks it, it exits 2 with a usage error
        await wait_for(pilot, lambda: skills.last_filter_test is not None, timeout_s=60)
        assert skills.last_filter_test is not None and "drop_unsupported_closure on chains" in skills.last_filter_test


async def test_monitor_picks_up_events_appended_by_another_process(make_app: MakeApp, store: Path) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        monitor = app.screen
        assert isinstance(monitor, MonitorScreen)
        before = app.store_state.head
        writer = textwrap.dedent(
            f"""
            from mkbsim.events import AttemptFinished, AttemptStarted, CampaignStarted, EventStore, NewEvent
            with EventStore({str(store.resolve())!r}) as store:
                started = CampaignStarted("fresh", {{"kind": "simulated"}}, "fp", "t")
                store.append([NewEvent.of("campaign-fresh", started)])
                for i in range(3):
                    aid = f"fresh-{{i}}"
                    store.append([
                        NewEvent.of("attempt-" + aid, AttemptStarted(aid, "fresh", "model-c", "p01", "mlp_norm",
                                    "tirx", "solo_tirx", i, {{"minutes": 40}})),
                        NewEvent.of("attempt-" + aid, AttemptFinished(aid, "finished", True, 0.5, 2.0, False)),
                    ])
            """
        )
        subprocess.run([sys.executable, "-c", writer], check=True, timeout=60)
        await wait_for(pilot, lambda: app.store_state.head == before + 7)
        table = monitor.query_one("#campaigns", PagedTable)
        await wait_for(pilot, lambda: any(getattr(r, "campaign_id", None) == "fresh" for r in _table_rows(table)))
        await idle(pilot)
        fresh = next(r for r in _table_rows(table) if r.campaign_id == "fresh")  # type: ignore[attr-defined]
        assert fresh.attempts == 3 and fresh.counts.passed == 3  # type: ignore[attr-defined]


async def test_empty_store_opens_the_monitor_when_events_arrive(make_app: MakeApp, tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    EventStore(path, create=True).close()
    app = make_app(Path("empty.sqlite"))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, EmptyStoreScreen) and bool(app.screen.query(Static)))
        assert "is empty" in _static_text(app.screen.query_one(Static))
        from tui_store_kit import Writer, fixed_clock

        with fixed_clock(), EventStore(path) as store:
            Writer(store).campaign_started("first", {"kind": "simulated", "problems": ["p01"], "profiles": ["m"]})
        # the monitor drawn with the campaign (the screen is current before it is mounted: closing the app
        # then would cut its mount short)
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen) and app.screen.shown_campaign == "first")


async def test_a_store_created_after_the_tui_opened_is_opened(make_app: MakeApp, tmp_path: Path) -> None:
    app = make_app(Path("later.sqlite"))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, StoreProblemScreen))
        assert "no such event store" in app.screen.problem  # type: ignore[attr-defined]
        from tui_store_kit import Writer, fixed_clock

        with fixed_clock(), EventStore(tmp_path / "later.sqlite", create=True) as store:
            Writer(store).campaign_started("first", {"kind": "simulated", "problems": ["p01"], "profiles": ["m"]})
        # the monitor drawn with the campaign (the screen is current before it is mounted: closing the app
        # then would cut its mount short)
        await wait_for(pilot, lambda: isinstance(app.screen, MonitorScreen) and app.screen.shown_campaign == "first")
        await settle(pilot)
        campaigns = _table_rows(app.screen.query_one("#campaigns", PagedTable))
        assert [c.campaign_id for c in campaigns] == ["first"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("name", "make", "says"),
    [
        ("missing.sqlite", lambda p: None, "no such event store"),
        ("a-directory", lambda p: p.mkdir(), "is a directory"),
        ("text.sqlite", lambda p: p.write_text("not a database at all, just text\n" * 100), "not a valid event store"),
        ("other.sqlite", lambda p: sqlite3.connect(p).execute("CREATE TABLE t (x)").connection.commit(),
         "not an mkbsim event store"),
    ],
)  # fmt: skip
async def test_a_bad_store_path_gets_a_clear_screen(
    make_app: MakeApp, tmp_path: Path, name: str, make: Callable[[Path], object], says: str
) -> None:
    make(tmp_path / name)
    app = make_app(Path(name))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, StoreProblemScreen)
        assert says in screen.problem
        assert says in _static_text(screen.query_one(Static))
        await pilot.press("2")  # no store: the other screens stay closed
        assert app.screen is screen
        await pilot.press("q")
    assert app.return_code == 0


async def test_a_screen_keeps_its_state_between_visits_and_going_to_one_closes_help(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await idle(pilot)
        comparisons = app.screen
        assert isinstance(comparisons, ComparisonsScreen)
        await pilot.press("h", "1", "question_mark")
        await idle(pilot)
        assert isinstance(app.screen, HelpScreen)
        await app.goto_mode("comparisons")  # what the command palette's "Go to Comparisons" does
        await idle(pilot)
        assert app.screen is comparisons and comparisons.query_state.harmed_only
        assert not any(isinstance(screen, HelpScreen) for screen in app.screen_stack)
        await pilot.press("1")
        await idle(pilot)
        assert isinstance(app.screen, MonitorScreen)


async def test_the_key_bar_shows_the_screen_s_keys_and_a_click_presses_one(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.screen.query_one(KeyBar).render().plain.startswith(" c Comparisons of campaign  h Harmed ")
        await pilot.press("2")
        await idle(pilot)
        screen = app.screen
        assert isinstance(screen, ComparisonsScreen)
        bar = screen.query_one(KeyBar)
        shown = bar.render().plain
        assert shown.startswith(" h Harmed only  v Verdict flips ") and shown.rstrip().endswith("▏^p palette")
        await pilot.click(KeyBar, offset=(shown.index("v Verdict"), 0))
        await idle(pilot)
        assert screen.query_state.verdict_flips and not screen.query_state.harmed_only


async def test_command_palette_opens_a_comparison(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p", *"p02 model-b cute")
        await wait_for(pilot, lambda: _palette_shows(app, "p02 · model-b"))
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen))
        replay = app.screen
        assert isinstance(replay, ReplayScreen) and replay.comparison is not None
        assert (replay.comparison.problem, replay.comparison.model) == ("p02", "model-b")


async def test_chains_show_hops_and_open_a_hop_in_replay(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("5")
        await idle(pilot)
        chains = app.screen
        assert isinstance(chains, ChainsScreen) and chains.detail is not None
        assert [h.hop for h in chains.detail.hops] == [0, 1, 2]
        closure = next(lin for lin in chains.detail.lineages if lin.category == "unsupported_closure")
        assert sorted(closure.sentences) == [0, 1, 2]  # the closure survives every hop
        await pilot.press("right_square_bracket", "right_square_bracket", "o")
        await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen))
        replay = app.screen
        assert isinstance(replay, ReplayScreen) and replay.comparison is not None
        assert (replay.comparison.chain_id, replay.comparison.hop) == ("chain-7f3a9c2e11", 2)


async def test_monitor_lift_follows_the_selected_campaign(make_app: MakeApp) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.lift is not None and app.lift.campaign_id == "live"
        await pilot.press("down", "down")
        await wait_for(pilot, lambda: app.lift is not None and app.lift.campaign_id == "demo")
        assert app.lift is not None and app.lift.resolved == 12
        pooled = {row["direction"]: row for row in app.lift.rows if row["model"] == "all"}
        assert pooled["cutedsl2tirx"]["n"] == 6 and pooled["tirx2cutedsl"]["n"] == 6
        await pilot.press("a")
        await wait_for(pilot, lambda: app.lift is not None and app.lift.campaign_id is None)


def test_cli_tui_without_textual_is_a_one_line_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "tui.app", None)  # as if the tui extra were not installed
    assert main(["tui", "--store", "x.sqlite"]) == 2
    err = capsys.readouterr().err
    assert "mkbsim[tui]" in err and "Traceback" not in err
