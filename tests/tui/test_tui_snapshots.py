"""Snapshots of every screen on the fixture store (update with `pytest --snapshot-update` after checking
the new SVGs by eye). Sizes are fixed; times come from the fixture's fixed clock, never the wall clock."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from textual.pilot import Pilot
from tui_pilot_kit import idle, settle
from tui_store_kit import build_store

from tui.app import MkbsimApp
from tui.data.filters import FilterCatalog, FilterTestResult
from tui.screens.skills import SkillsScreen

SIZE = (120, 40)


async def _settled(pilot: Pilot[None]) -> None:
    await settle(pilot)


def _after(*keys: str) -> Callable[[Pilot[None]], object]:
    async def run(pilot: Pilot[None]) -> None:
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await idle(pilot)

    return run


def test_monitor_running_campaign(snap_compare: Callable[..., bool], make_app: Callable[..., MkbsimApp]) -> None:
    assert snap_compare(make_app(), terminal_size=SIZE, run_before=_settled)


def test_monitor_finished_campaign(snap_compare: Callable[..., bool], make_app: Callable[..., MkbsimApp]) -> None:
    assert snap_compare(make_app(), terminal_size=SIZE, run_before=_after("down", "down"))


def test_comparisons(snap_compare: Callable[..., bool], make_app: Callable[..., MkbsimApp]) -> None:
    assert snap_compare(make_app(), terminal_size=SIZE, run_before=_after("2"))


def test_comparisons_harmed_only_sorted_by_model(
    snap_compare: Callable[..., bool], make_app: Callable[..., MkbsimApp]
) -> None:
    assert snap_compare(make_app(), terminal_size=SIZE, run_before=_after("2", "h", "s"))


def test_replay_of_a_harmed_comparison(snap_compare: Callable[..., bool], make_app: Callable[..., MkbsimApp]) -> None:
    keys = ("2", "h", "enter", *["right"] * 9, "x")
    assert snap_compare(make_app(), terminal_size=SIZE, run_before=_after(*keys))


def test_replay_without_a_comparison(snap_compare: Callable[..., bool], make_app: Callable[..., MkbsimApp]) -> None:
    assert snap_compare(make_app(), terminal_size=SIZE, run_before=_after("3"))


def test_skills_with_filter_preview(snap_compare: Callable[..., bool], make_app: Callable[..., MkbsimApp]) -> None:
    assert snap_compare(make_app(), terminal_size=SIZE, run_before=_after("4", "f", "enter"))


def test_skills_without_filters(snap_compare: Callable[..., bool], make_app: Callable[..., MkbsimApp]) -> None:
    app = make_app(filters=FilterCatalog({}, "skill_filters provides none"))
    assert snap_compare(app, terminal_size=SIZE, run_before=_after("4"))


def test_chains(snap_compare: Callable[..., bool], make_app: Callable[..., MkbsimApp]) -> None:
    assert snap_compare(make_app(), terminal_size=SIZE, run_before=_after("5"))


def test_chains_empty(snap_compare: Callable[..., bool], make_app: Callable[..., MkbsimApp], tmp_path: Path) -> None:
    path = Path("no-chains.sqlite")
    build_store(tmp_path / path, chains=False, live=False)
    assert snap_compare(make_app(path), terminal_size=SIZE, run_before=_after("5"))


def test_chains_with_a_skipped_hop(
    snap_compare: Callable[..., bool], make_app: Callable[..., MkbsimApp], tmp_path: Path
) -> None:
    path = Path("skipped.sqlite")
    build_store(tmp_path / path, live=False, skipped_chain=True)
    assert snap_compare(make_app(path), terminal_size=SIZE, run_before=_after("5"))


#: what `mkbsim filter-test --format json` prints (two models, one direction, pooled)
FILTER_TEST_JSON = json.dumps({"filter": "drop_unsupported_closure", "base_campaign_id": "demo",
                               "campaign_id": "demo-filtered-drop_unsupported_closure", "cells": [
    {"model": model, "direction": direction, "n": n, "changed": changed, "lift_unfiltered": lift0,
     "lift_filtered": lift1, "lift_change": lift1 - lift0, "help_unfiltered": 0.3, "help_filtered": 0.35,
     "harm_unfiltered": harm0, "harm_filtered": harm1, "sign_p": sign_p, "wilcoxon_p": wilcoxon_p}
    for model, direction, n, changed, lift0, lift1, harm0, harm1, sign_p, wilcoxon_p in (
        ("openrouter/meta-llama/llama-3.1-405b-instruct", "cutedsl2tirx", 3, 2, -0.217, 0.05, 0.33, 0.0, 0.5, 0.25),
        ("sim-glm-5.3-flash", "cutedsl2tirx", 3, 1, 0.26, 0.26, 0.33, 0.33, 1.0, None),
        ("all", "cutedsl2tirx", 6, 3, -0.007, 0.14, 0.33, 0.17, 0.25, 0.11),
    )]})  # fmt: skip


def test_filter_test_result(snap_compare: Callable[..., bool], make_app: Callable[..., MkbsimApp]) -> None:
    async def run(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("4")
        await idle(pilot)
        screen = pilot.app.screen
        assert isinstance(screen, SkillsScreen)
        screen._filter_test_ended("filter test on demo", 0, "3 rows", FilterTestResult.parse(FILTER_TEST_JSON))
        await idle(pilot)

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=run)


def test_help(snap_compare: Callable[..., bool], make_app: Callable[..., MkbsimApp]) -> None:
    assert snap_compare(make_app(), terminal_size=SIZE, run_before=_after("2", "question_mark"))


def test_missing_store(snap_compare: Callable[..., bool], make_app: Callable[..., MkbsimApp]) -> None:
    assert snap_compare(make_app(Path("missing.sqlite")), terminal_size=SIZE)


def test_empty_store(snap_compare: Callable[..., bool], make_app: Callable[..., MkbsimApp], tmp_path: Path) -> None:
    from mkbsim.events import EventStore

    EventStore(tmp_path / "empty.sqlite", create=True).close()
    assert snap_compare(make_app(Path("empty.sqlite")), terminal_size=SIZE)
