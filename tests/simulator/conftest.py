"""Shared fixtures: the design spaces (loading the catalogue imports torch, so once per session) and a
small seeded campaign recorded in a store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mkbsim.campaigns import CampaignSummary, SimCampaign, run_campaign
from mkbsim.events import EventStore
from mkbsim.simulator import CampaignConfig, select_problems, shipped_profiles

# two problems per family: every family's plans and reformulation take part
SMALL_PROBLEMS = "p01,p04,p19,p23,p28,p33,p45,p49,p52,p58,p62,p72"


@pytest.fixture(scope="session")
def small_config() -> CampaignConfig:
    return CampaignConfig(tuple(shipped_profiles().values()), tuple(select_problems(SMALL_PROBLEMS)), seed=7)


@pytest.fixture(scope="session")
def small_campaign(
    tmp_path_factory: pytest.TempPathFactory, small_config: CampaignConfig
) -> tuple[Path, CampaignSummary]:
    path = tmp_path_factory.mktemp("sim") / "events.sqlite"
    with EventStore(path, create=True) as store:
        summary = run_campaign(store, SimCampaign(small_config))
    return path, summary


@pytest.fixture
def campaign_copy(small_campaign: tuple[Path, CampaignSummary], tmp_path: Path) -> tuple[Path, CampaignSummary]:
    """A private copy of the small campaign's store, for tests that append to it."""
    path = tmp_path / "copy.sqlite"
    with sqlite3.connect(small_campaign[0]) as source, sqlite3.connect(path) as target:
        source.backup(target)
    return path, small_campaign[1]
