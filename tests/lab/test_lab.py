"""The read model: catching up once, reading a read-only store without writing (computing lagging views in a
scratch database), readers for other threads, the damage check."""

from __future__ import annotations

import random
import shutil
import threading
from pathlib import Path

import pytest
from metrics.transfer_kit import interleave, random_campaign

import mkbsim
from mkbsim.errors import StoreDamaged, StoreMissing
from mkbsim.events import EventStore
from mkbsim.lab import Lab


def _store(path: Path, *seeds: int) -> Path:
    with EventStore(path, create=True) as store:
        for seed in seeds:
            store.append(list(interleave(random.Random(seed), random_campaign(seed))))
    return path


def _views(lab: mkbsim.lab.LabReader) -> tuple[object, ...]:
    data = lab.transfer.report_data()
    grid = lab.monitor.attempt_counts()
    return (data.comparisons, sorted(data.solos, key=repr), data.pending, sorted(grid.items()),
            lab.skills.positions(None))  # fmt: skip


def test_mkbsim_exports_the_lab_lazily() -> None:
    assert mkbsim.Lab is Lab
    with pytest.raises(AttributeError):
        _ = mkbsim.Nope  # type: ignore[attr-defined]


def test_the_report_loads_only_the_query_groups_it_reads(tmp_path: Path) -> None:
    import subprocess
    import sys

    store = _store(tmp_path / "events.sqlite", 1)
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys; from mkbsim.cli._main import main; main(['report', "
         f"'--store', {str(store)!r}])\nprint(*sorted(m for m in sys.modules if m.startswith('mkbsim.lab')))"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert "mkbsim.lab._transfer" in loaded
    assert not {"mkbsim.lab._monitor", "mkbsim.lab._browse", "mkbsim.lab._skills"} & set(loaded)
    with pytest.raises(AttributeError):
        _ = mkbsim.lab.Nope  # type: ignore[attr-defined]


def test_a_writable_store_is_brought_current_once(tmp_path: Path) -> None:
    path = _store(tmp_path / "s.sqlite", 1)
    with Lab(path) as lab:
        assert lab.pending() == 0 and not lab.readonly and lab.freshness().note() is None
        assert lab.refresh() == 0  # nothing left to apply
        assert lab.transfer.report_data().comparisons


def test_a_read_only_store_with_current_projections_is_read_as_it_is(tmp_path: Path) -> None:
    path = _store(tmp_path / "s.sqlite", 1)
    with Lab(path) as lab:
        expected = _views(lab)
    before = path.read_bytes()
    with Lab(path, readonly=True) as lab:
        assert lab.freshness() == mkbsim.lab.Freshness(lab.head, True, 0, False)
        assert _views(lab) == expected
        with lab.reader() as reader:
            assert _views(reader) == expected
    assert path.read_bytes() == before


def test_lagging_projections_of_a_read_only_store_are_computed_in_scratch(tmp_path: Path) -> None:
    path = _store(tmp_path / "s.sqlite", 1)
    Lab(path).close()  # projections stored at the first campaign
    with EventStore(path) as store:
        store.append(list(interleave(random.Random(2), random_campaign(2))))
        added = store.last_position()
    current = tmp_path / "current.sqlite"
    shutil.copy(path, current)
    with Lab(current) as lab:
        expected = _views(lab)
    before = path.read_bytes()
    with Lab(path, readonly=True) as lab:
        freshness = lab.freshness()
        assert freshness.computed and freshness.stored_lag > 0 and lab.pending() == 0
        assert _views(lab) == expected
        results: list[object] = []
        thread = threading.Thread(target=lambda: results.append(_views(lab.reader())))  # another thread's reader
        thread.start()
        thread.join()
        assert results == [expected]
    assert path.read_bytes() == before and added > 0


def test_a_read_only_lab_moves_to_scratch_when_the_store_grows(tmp_path: Path) -> None:
    path = _store(tmp_path / "s.sqlite", 1)
    Lab(path).close()
    with Lab(path, readonly=True) as lab:
        assert not lab.freshness().computed and lab.generation == 0
        with EventStore(path) as writer:  # another process keeps writing
            writer.append(list(interleave(random.Random(2), random_campaign(2))))
        assert lab.refresh() > 0
        assert lab.freshness().computed and lab.generation == 1
        with Lab(path) as current:
            assert _views(lab) == _views(current)


def test_a_missing_store_is_not_created(tmp_path: Path) -> None:
    with pytest.raises(StoreMissing):
        Lab(tmp_path / "missing.sqlite")
    assert not list(tmp_path.iterdir())


def test_verify_finds_damaged_pages_in_the_background_too(tmp_path: Path) -> None:
    from kits.faults import damage_events

    path = _store(tmp_path / "s.sqlite", 1, 2, 3)
    Lab(path).close()
    damage_events(path)
    with Lab(path, catch_up=False) as lab:
        with pytest.raises(StoreDamaged, match="damaged"):
            lab.verify()
        lab.start_verify()
        with pytest.raises(StoreDamaged, match="damaged"):
            lab.verify()
