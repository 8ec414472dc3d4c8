"""Shared fixtures of the skills tests: a small seeded simulated campaign and private copies of its store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mkbsim.campaigns import CampaignSummary, SimCampaign, run_campaign
from mkbsim.events import EventStore
from mkbsim.simulator import CampaignConfig, select_problems, shipped_profiles

# two problems per family
PROBLEMS = "p01,p04,p19,p23,p28,p33,p45,p49,p52,p58,p62,p72"


@pytest.fixture(scope="session")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CampaignSummary]:
    config = CampaignConfig(tuple(shipped_profiles().values()), tuple(select_problems(PROBLEMS)), seed=7)
    path = tmp_path_factory.mktemp("skills") / "events.sqlite"
    with EventStore(path, create=True) as store:
        summary = run_campaign(store, SimCampaign(config))
    return path, summary


@pytest.fixture
def store_copy(campaign: tuple[Path, CampaignSummary], tmp_path: Path) -> tuple[Path, str]:
    """A private copy of the campaign's store (for tests that append), and the campaign id."""
    path = tmp_path / "copy.sqlite"
    with sqlite3.connect(campaign[0]) as source, sqlite3.connect(path) as target:
        source.backup(target)
    return path, campaign[1].campaign_id
