"""The SQLite event store: the contract kit plus file-level faults (locks, corruption, full disk)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from kits.store_kit import EventStoreContract, MakeStore, file_store, step
from mkbsim.errors import NotAStore, StoreBusy, StoreFull, StoreMissing, StoreReadOnly, UserError
from mkbsim.events import EventStore, NewEvent, Payload, StoreError, event_type, upcaster


@pytest.fixture
def make_store(tmp_path: Path) -> MakeStore:
    return file_store(tmp_path)


class TestSqliteStore(EventStoreContract):
    pass


def test_missing_store_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreMissing, match="no such event store"):
        EventStore(tmp_path / "missing.sqlite")
    with pytest.raises(StoreMissing, match="no such event store"):
        EventStore(tmp_path / "missing.sqlite", create=True, readonly=True)
    assert not (tmp_path / "missing.sqlite").exists()
    with pytest.raises(StoreMissing, match="no such directory"):
        EventStore(tmp_path / "nodir" / "s.sqlite", create=True)


def test_corrupt_and_foreign_files_are_refused(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(NotAStore, match="not a valid event store"):
        EventStore(junk)
    with pytest.raises(NotAStore, match="not a valid event store"):
        EventStore(junk, readonly=True)
    assert junk.read_bytes().startswith(b"this is not")
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(NotAStore, match="not an mkbsim event store"):
        EventStore(other)
    with pytest.raises(NotAStore, match="is a directory"):
        EventStore(tmp_path)
    assert issubclass(NotAStore, UserError) and not issubclass(StoreError, UserError)


def test_newer_store_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    EventStore(path, create=True).close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(NotAStore, match="schema 99 is newer"):
        EventStore(path)


def test_locked_store_gives_a_clear_error_and_keeps_data(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = EventStore(path, create=True, busy_timeout_ms=100)
    store.append([step("a", 0)])
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreBusy, match="locked by another process"):
        store.append([step("a", 1)])
    other.execute("ROLLBACK")
    other.close()
    store.append([step("a", 1)])
    assert store.count() == 2 and store.check().ok


def test_full_disk_loses_nothing_already_stored(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "s.sqlite", create=True)
    store.append([step("a", i) for i in range(10)])
    pages = store.connection.execute("PRAGMA page_count").fetchone()[0]
    store.connection.execute(f"PRAGMA max_page_count = {pages + 2}")  # the disk fills up
    big = [NewEvent("a", "AgentStep", step("a", i).payload | {"content": "x" * 4000}) for i in range(200)]
    with pytest.raises(StoreFull, match="disk is full"):
        store.append(big)
    assert store.count() == 10 and store.check().ok
    store.connection.execute("PRAGMA max_page_count = 1073741823")
    store.append(big)
    assert store.count() == 210


def test_readonly_store_reads_without_writing(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with EventStore(path, create=True) as store:
        store.append([step("a", i) for i in range(3)])
    before = path.read_bytes()
    with EventStore(path, readonly=True) as store:
        assert [e.version for e in store.read()] == [1, 2, 3] and store.check().ok
        with pytest.raises(StoreReadOnly, match="read-only"):
            store.append([step("a", 3)])
    assert path.read_bytes() == before


def test_zero_length_file_reads_as_an_empty_store_and_stays_empty(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    path.touch()
    with EventStore(path, readonly=True) as store:
        assert not store.initialised and store.last_position() == 0 and list(store.read()) == []
        assert store.type_counts() == {} and store.check().ok
    assert path.stat().st_size == 0 and [p.name for p in tmp_path.iterdir()] == ["empty.sqlite"]


def test_events_are_immutable(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "s.sqlite", create=True)
    store.append([step("a", 0)])
    for sql in ("UPDATE events SET type = 'X'", "DELETE FROM events"):
        with pytest.raises(sqlite3.DatabaseError, match="immutable"):
            store.connection.execute(sql)


def _raw_insert(
    store: EventStore, position: int, stream: str, version: int, type_: str, payload: str, sv: int = 1
) -> None:
    store.connection.execute(
        "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, '2026-01-01T00:00:00+00:00', ?)",
        (position, f"raw-{position}", stream, version, type_, sv, payload),
    )


@pytest.mark.parametrize(
    "corrupt, problem",
    [
        (lambda s: _raw_insert(s, 5, "a", 4, "AgentStep", json.dumps(step("a", 9).payload)), "not gap-free"),
        (lambda s: _raw_insert(s, 4, "a", 5, "AgentStep", json.dumps(step("a", 9).payload)), "versions 1..5"),
        (lambda s: _raw_insert(s, 4, "a", 4, "AgentStep", "{broken"), "not a JSON object"),
        (lambda s: _raw_insert(s, 4, "a", 4, "AgentStep", '{"attempt_id": 3}'), "AgentStep.attempt_id"),
    ],
)
def test_check_reports_the_first_problem(tmp_path: Path, corrupt, problem: str) -> None:  # type: ignore[no-untyped-def]
    store = EventStore(tmp_path / "s.sqlite", create=True)
    store.append([step("a", i) for i in range(3)])
    corrupt(store)
    report = store.check()
    assert not report.ok and problem in (report.problem or "")


def test_unknown_types_are_preserved_and_reported(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "s.sqlite", create=True)
    store.append([step("a", 0)])
    _raw_insert(store, 2, "future", 1, "FromTheFuture", '{"x": 1}')
    assert [e.type for e in store.read()] == ["AgentStep", "FromTheFuture"]
    report = store.check()
    assert report.ok and report.unknown_types == {"FromTheFuture": 1}


@event_type
@dataclass(frozen=True)
class _Renamed(Payload):
    """A test type at schema v2: v1 called the field `old`."""

    TYPE: ClassVar[str] = "TestRenamed"
    SCHEMA_VERSION: ClassVar[int] = 2
    new: str


@upcaster("TestRenamed", 1)
def _v1_to_v2(payload: dict) -> dict:  # type: ignore[type-arg]
    return {"new": payload.pop("old"), **payload}


def test_old_schema_versions_are_upcast_on_read(tmp_path: Path) -> None:
    store = EventStore(tmp_path / "s.sqlite", create=True)
    _raw_insert(store, 1, "t", 1, "TestRenamed", '{"old": "value"}', sv=1)
    store.append([NewEvent.of("t", _Renamed(new="fresh"))])
    events = list(store.read())
    assert [e.payload for e in events] == [{"new": "value"}, {"new": "fresh"}]
    assert [e.schema_version for e in events] == [2, 2]
    stored = store.connection.execute("SELECT schema_version FROM events ORDER BY position").fetchall()
    assert stored == [(1,), (2,)]  # events are never rewritten


def test_threads_share_one_store_safely(tmp_path: Path) -> None:
    """Concurrent attempts append to (and read) one instance from many threads: no interleaved
    batches, no lost events, gap-free positions, per-stream versions 1..n."""
    import threading

    with EventStore(tmp_path / "t.sqlite", create=True) as store:
        errors: list[BaseException] = []

        def attempt(n: int) -> None:
            try:
                stream = f"attempt-t{n}"
                for i in range(50):
                    batch = [step(stream, 3 * i + k) for k in range(3)]
                    store.append(batch, expected_version=3 * i)
                    assert len(store.read_stream(stream)) == 3 * (i + 1)
                    store.last_position()
            except BaseException as exc:  # reported below, in the test's thread
                errors.append(exc)

        threads = [threading.Thread(target=attempt, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert store.count() == 8 * 50 * 3
        for n in range(8):  # every batch of three is contiguous: no other thread's event inside one
            positions = [e.position for e in store.read_stream(f"attempt-t{n}")]
            assert all(positions[3 * i + 2] - positions[3 * i] == 2 for i in range(50))
        report = store.check(validate_payloads=False)
        assert report.ok, report.problem
