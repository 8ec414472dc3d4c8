"""The integrity check's verdict kept beside the store: an unchanged sound file is not read again; any write,
a damaged page included, makes the next check read every page (DESIGN §9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kits.faults import campaign_store, damage_events
from mkbsim.errors import StoreDamaged
from mkbsim.events import EventStore, NewEvent
from mkbsim.events import _store as store_module


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the page checks that read the file."""
    calls: list[int] = []
    original = store_module.integrity_problem

    def counted(conn: object) -> str | None:
        calls.append(1)
        return original(conn)  # type: ignore[arg-type]

    monkeypatch.setattr(store_module, "integrity_problem", counted)
    return calls


def test_an_unchanged_sound_store_is_checked_once(tmp_path: Path, checks: list[int]) -> None:
    path = campaign_store(tmp_path / "s.sqlite")
    for _ in range(3):
        with EventStore(path, readonly=True) as store:
            store.verify_pages()
    assert len(checks) == 1
    with EventStore(path) as store:
        store.check()  # `events check` always reads the pages
    assert len(checks) == 2


def test_a_write_or_a_damaged_page_makes_the_next_check_read_the_file(tmp_path: Path, checks: list[int]) -> None:
    path = campaign_store(tmp_path / "s.sqlite")
    with EventStore(path) as store:
        store.verify_pages()
        store.append([NewEvent("campaign-c", "CampaignFinished", {"campaign_id": "c", "counts": {}})])
        store.verify_pages()
    assert len(checks) == 2
    damage_events(path)
    with EventStore(path, readonly=True) as store, pytest.raises(StoreDamaged):
        store.verify_pages()
    assert len(checks) == 3
