"""The SQLite event store (DESIGN §3): append-only, gap-free positions, per-stream versions."""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import repeat
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from mkbsim.errors import (
    ConcurrencyError,
    MkbsimError,
    NotAStore,
    PayloadError,
    StoreMissing,
    StoreReadOnly,
)
from mkbsim.events._codec import CodecError, decode, encode, encode_many
from mkbsim.events._faults import (
    damaged,
    faults_as_errors,
    integrity_problem,
    store_fault,
    writable,
    write_protected,
)
from mkbsim.events._ids import new_event_ids
from mkbsim.events._insert import insert_events
from mkbsim.events._schema import Payload, all_valid, upcast, validate, versions
from mkbsim.events._verdicts import file_state, remember, verified

#: Version of the store's own layout (tables, indexes), kept in PRAGMA user_version.
STORE_SCHEMA = 1

#: The projections' checkpoints: projection name -> last position applied (DESIGN §3).
CHECKPOINTS = "projection_checkpoints"
CHECKPOINT_COLUMNS = (
    "name TEXT PRIMARY KEY, position INTEGER NOT NULL, version INTEGER NOT NULL, updated_at TEXT NOT NULL"
)

_TABLES = f"""
CREATE TABLE IF NOT EXISTS events (
    position       INTEGER PRIMARY KEY,
    event_id       TEXT    NOT NULL UNIQUE,
    stream_id      TEXT    NOT NULL,
    version        INTEGER NOT NULL,
    type           TEXT    NOT NULL,
    schema_version INTEGER NOT NULL,
    recorded_at    TEXT    NOT NULL,
    payload        TEXT    NOT NULL,
    UNIQUE (stream_id, version)
);
CREATE TABLE IF NOT EXISTS {CHECKPOINTS} ({CHECKPOINT_COLUMNS});
"""
#: Pages of a new store: fewer, fuller pages per appended batch (the write-ahead log writes whole pages).
PAGE_SIZE = 16_384
#: The (type, position) index older stores carry: dropped by a writer, for it cost appends a fifth of
#: their time and reads by type scan positions instead (see ``EventStore.read``).
_TYPE_INDEX = "events_by_type"
_DDL = (
    _TABLES
    + """
CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
"""
)
#: An uninitialised file read without writing: the same tables, empty, in the connection's TEMP schema.
_EMPTY_VIEW = _TABLES.replace("CREATE TABLE IF NOT EXISTS", "CREATE TEMP TABLE IF NOT EXISTS")


_COLUMNS = "position, event_id, stream_id, version, type, schema_version, recorded_at, payload"
#: each stream of a JSON array with its version (0 for a new one)
_HEADS = "SELECT value, COALESCE((SELECT MAX(version) FROM events WHERE stream_id = value), 0) FROM json_each(?)"
#: the largest position SQLite can hold: "no upper bound"
_LAST = 2**63 - 1


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append. ``event_id`` makes the append idempotent; omitted, a fresh one is made."""

    stream_id: str
    type: str
    payload: dict[str, Any]
    event_id: str | None = None

    @classmethod
    def of(cls, stream_id: str, payload: Payload, event_id: str | None = None) -> NewEvent:
        return cls(stream_id, payload.TYPE, payload.to_dict(), event_id)

    def __reduce__(self) -> tuple[Callable[..., NewEvent], tuple[str, str, dict[str, Any], str | None]]:
        # events cross process boundaries by the tens of thousands (executor results, the writer actor):
        # the positional form pickles ~3x faster than a frozen slotted dataclass's generic state
        return NewEvent, (self.stream_id, self.type, self.payload, self.event_id)


class RecordedEvent(NamedTuple):
    """A stored event, payload decoded and upcast. A named tuple: reads build millions of them, and a
    tuple is made in a third of a frozen dataclass's time."""

    position: int
    event_id: str
    stream_id: str
    version: int
    type: str
    schema_version: int
    recorded_at: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class AppendResult:
    appended: int
    duplicates: int
    first_position: int | None
    last_position: int | None


@dataclass(frozen=True)
class CheckReport:
    ok: bool
    events: int
    streams: int
    unknown_types: dict[str, int]
    problem: str | None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class _Rows(NamedTuple):
    """A batch's columns, ready to insert (versions are counted under the lock)."""

    ids: list[str]
    streams: list[str]
    types: list[str]
    texts: list[str]
    recorded_at: str

    def without(self, ids: set[str]) -> _Rows:
        keep = [i for i, event_id in enumerate(self.ids) if event_id not in ids]
        ids_, streams, types_, texts = ([column[i] for i in keep] for column in self[:4])
        return _Rows(ids_, streams, types_, texts, self.recorded_at)


def _checked_json(batch: Sequence[NewEvent], types_: Sequence[str], payloads: Sequence[Any]) -> list[str]:
    """Every payload checked against its type's schema, NaN refused (DESIGN §3), then the JSON texts.

    msgspec decides the common, valid batch in C; ``validate`` looks at each payload only when it says
    no, and raises naming the event and its field.
    """
    if not all_valid(types_, payloads):
        for i, (type_, payload) in enumerate(zip(types_, payloads, strict=True)):
            try:
                validate(type_, payload)  # raises UnknownEventType for a type no payload class declares
            except PayloadError as exc:
                raise PayloadError(f"event {i} ({batch[i].stream_id}): {exc}") from None
    try:
        return encode_many(payloads)
    except CodecError as batch_error:
        for i, payload in enumerate(payloads):  # a value JSON cannot hold: name the first event with one
            try:
                encode(payload)
            except CodecError as exc:
                raise PayloadError(
                    f"event {i} ({batch[i].stream_id}) {types_[i]}: payload is not JSON: {exc}"
                ) from None
        raise PayloadError(f"the batch's payloads are not JSON: {batch_error}") from None


class EventLog(Protocol):
    """What an attempt needs of the store: its streams, read and appended with optimistic concurrency.

    ``EventStore`` is one; an attempt on a Ray worker gets one whose calls go to the writer actor on
    the head node (``mkbsim.campaigns.RemoteStore``), so every event still lands in the one store.
    """

    def read_stream(self, stream_id: str) -> list[RecordedEvent]: ...

    def append(
        self, events: Iterable[NewEvent], *, expected_version: int | Mapping[str, int] | None = None
    ) -> AppendResult: ...


class EventStore:
    """One SQLite file. Open one instance per process: it owns the process's writer connection.

    Readers in other processes (monitors, the TUI) open their own instance and use ``tail``; WAL
    lets them read while a writer appends.

    Threads may share an instance (an LLM campaign runs its attempts in threads): every statement,
    and every append's whole transaction, runs under the instance's lock, so appends never
    interleave and a read never sees half a batch. A paged ``read`` takes the lock per page, not
    for the whole iteration (a long scan must not stall the writers). ``connection`` bypasses the
    lock: it is for one thread at a time (projections and reports, which own their process).

    ``readonly`` opens the file without ever writing to it (``mode=ro``; in a folder that cannot be
    written and holds no unapplied write-ahead log, as an immutable file): a file without the event
    tables yet (a zero-length file, a store being created) then reads as an empty store. Every
    SQLite error is raised as the store fault it stands for (``mkbsim.errors``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = False,
        readonly: bool = False,
        durable: bool = False,
        busy_timeout_ms: int = 10_000,
    ) -> None:
        self.path = Path(path)
        self.readonly = readonly
        if self.path.is_dir():
            raise NotAStore(f"{self.path}: is a directory, not an event store file")
        if not self.path.exists():
            if not create or readonly:
                raise StoreMissing(f"{self.path}: no such event store (create one with `mkbsim events init`)")
            if not self.path.parent.exists():
                raise StoreMissing(f"{self.path.parent}: no such directory")
        elif not readonly and not writable(self.path):  # refused before anything is planned or run (root too)
            raise StoreReadOnly(f"{self.path}: the store is read-only and this command writes to it")
        # shared by threads under ``_lock`` (sqlite3 objects are safe to use from any thread when serialized)
        self._lock = threading.RLock()
        try:
            self._conn = self._connect(busy_timeout_ms / 1000)
        except sqlite3.Error as exc:
            raise self._open_fault(exc) from exc
        try:
            self.initialised = self._prepare(durable, busy_timeout_ms)
        except sqlite3.Error as exc:
            self._conn.close()
            raise self._open_fault(exc) from exc
        except BaseException:
            self._conn.close()
            raise

    def _open_fault(self, exc: sqlite3.Error) -> MkbsimError:
        if getattr(exc, "sqlite_errorname", "") == "SQLITE_NOTADB":
            return NotAStore(f"{self.path}: not a valid event store (not an SQLite database, or its header is damaged)")
        return store_fault(exc, self.path)

    def _connect(self, timeout: float) -> sqlite3.Connection:
        if not self.readonly:
            return sqlite3.connect(self.path, isolation_level=None, timeout=timeout, check_same_thread=False)
        # A WAL store in a folder that cannot be written: its -shm file cannot be made. A store whose file or
        # folder has no write permission bit (``chmod a-w``) is not to change: no -shm file is made beside it
        # (root could). Either way, with no unapplied log beside it, the file alone is the whole store and
        # nobody changes it: it is opened immutable.
        log = Path(f"{self.path}-wal")
        settled = not (log.exists() and log.stat().st_size > 0)
        uri = f"{self.path.absolute().as_uri()}?mode=ro"
        if settled and (write_protected(self.path) or write_protected(self.path.absolute().parent)):
            uri += "&immutable=1"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=timeout, check_same_thread=False)
        try:
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError as exc:
            conn.close()
            if exc.sqlite_errorname != "SQLITE_CANTOPEN" or not settled:
                raise
            conn = sqlite3.connect(f"{uri}&immutable=1", uri=True, isolation_level=None, timeout=timeout,
                                   check_same_thread=False)  # fmt: skip
        except sqlite3.DatabaseError:
            conn.close()
            raise
        return conn

    def _prepare(self, durable: bool, busy_timeout_ms: int) -> bool:
        """Check the layout (and, for a writer, create it); whether the file holds the event tables."""
        conn = self._conn
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > STORE_SCHEMA:
            raise NotAStore(
                f"{self.path}: store schema {version} is newer than this mkbsim supports ({STORE_SCHEMA});"
                " upgrade mkbsim"
            )
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if version == 0 and tables and "events" not in tables:
            raise NotAStore(f"{self.path}: an SQLite file, but not an mkbsim event store")
        if self.readonly:
            if "events" not in tables:
                conn.executescript(_EMPTY_VIEW)
            return "events" in tables
        if not tables:  # a new file: its page size is set before anything is written
            conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")
        if version < STORE_SCHEMA:
            conn.executescript(_DDL + f"PRAGMA user_version = {STORE_SCHEMA};")
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?", (_TYPE_INDEX,)).fetchone():
            conn.execute(f"DROP INDEX {_TYPE_INDEX}")
        return True

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> EventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connection(self) -> sqlite3.Connection:
        """The writer connection (projections write their tables through it, in one transaction)."""
        return self._conn

    def interrupt(self) -> None:
        """Stop the statement running on this store's connection (from another thread): it fails as interrupted."""
        self._conn.interrupt()

    def faults(self) -> contextlib.AbstractContextManager[None]:
        """A context raising SQLite errors of this store's connection as store faults."""
        return faults_as_errors(self.path, self._conn)

    # -- writing ------------------------------------------------------------------------------

    def append(
        self,
        events: Iterable[NewEvent],
        *,
        expected_version: int | Mapping[str, int] | None = None,
    ) -> AppendResult:
        """Append a batch in one transaction; all or nothing.

        ``expected_version``: an int requires a single-stream batch whose stream is at that version
        now (0 = the stream must not exist yet); a mapping gives it per stream; None skips the check.
        Events whose ``event_id`` is already stored are skipped (idempotent retries), and a batch
        made only of such events succeeds without a version check.
        """
        batch = list(events)
        if not batch:
            return AppendResult(0, 0, None, None)
        # column by column (a comprehension's attribute read is specialised for slots: cheaper than attrgetter
        # in C), and no per-event row objects to patch
        streams = [ev.stream_id for ev in batch]
        types_ = [ev.type for ev in batch]
        payloads = [ev.payload for ev in batch]
        given_ids = [ev.event_id for ev in batch]
        texts = _checked_json(batch, types_, payloads)
        ids = new_event_ids(len(batch))
        caller_ids = [i for i in given_ids if i is not None] if given_ids.count(None) != len(batch) else []
        if caller_ids:  # a caller's own id wins
            if len(set(caller_ids)) != len(caller_ids):
                twice = next(i for i in caller_ids if caller_ids.count(i) > 1)
                raise PayloadError(f"event_id {twice!r} appears twice in one batch")
            ids = [fresh if given is None else given for given, fresh in zip(given_ids, ids, strict=True)]
        rows = _Rows(ids, streams, types_, texts, _now())
        conn = self._conn
        try:
            self._lock.acquire()
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = self._append_locked(conn, rows, caller_ids, expected_version)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # SQLite already rolled back on some errors (e.g. disk full)
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.IntegrityError as exc:
            raise ConcurrencyError(f"{self.path}: concurrent append clashed: {exc}") from exc
        except sqlite3.Error as exc:
            raise store_fault(exc, self.path, self._conn) from exc
        finally:
            self._lock.release()
        return result

    def _append_locked(
        self,
        conn: sqlite3.Connection,
        rows: _Rows,
        caller_ids: list[str],
        expected_version: int | Mapping[str, int] | None,
    ) -> AppendResult:
        duplicates = 0
        if caller_ids:
            stored = self._existing_ids(conn, caller_ids)
            if stored:
                rows = rows.without(stored)
                duplicates = sum(1 for i in caller_ids if i in stored)
                if not rows.ids:
                    return AppendResult(0, duplicates, None, None)
        heads = self._heads(conn, dict.fromkeys(rows.streams))
        if expected_version is not None:
            if isinstance(expected_version, int):
                if len(heads) != 1:
                    raise ConcurrencyError("an int expected_version needs a batch on a single stream")
                expected = dict.fromkeys(heads, expected_version)
            else:
                expected = dict(expected_version)
            others = self._heads(conn, expected.keys() - heads.keys())
            for stream, want in expected.items():
                have = heads[stream] if stream in heads else others[stream]
                if have != want:
                    raise ConcurrencyError(f"stream {stream!r} is at version {have}, expected {want}")
        # each event one past its stream's head, in batch order: a counter per stream, drawn in C
        counters = {stream: itertools.count(head + 1) for stream, head in heads.items()}
        stream_versions = list(map(next, map(counters.__getitem__, rows.streams)))
        schema_versions = list(map(versions().get, rows.types, repeat(1)))
        last = insert_events(conn, rows.recorded_at, rows.ids, rows.streams, stream_versions, rows.types,
                             schema_versions, rows.texts)  # fmt: skip
        n = len(rows.ids)
        return AppendResult(n, duplicates, last - n + 1, last)

    @staticmethod
    def _heads(conn: sqlite3.Connection, streams: Iterable[str]) -> dict[str, int]:
        """Each stream's current version (0 for a new one), in one statement whatever their number (the
        streams as one JSON array): each stream's head is the last entry of the (stream_id, version) index."""
        return dict(conn.execute(_HEADS, (encode(list(streams)),)).fetchall())

    @staticmethod
    def _existing_ids(conn: sqlite3.Connection, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found.update(r[0] for r in conn.execute(f"SELECT event_id FROM events WHERE event_id IN ({marks})", chunk))
        return found

    # -- reading ------------------------------------------------------------------------------

    def read(
        self,
        from_position: int = 0,
        to_position: int | None = None,
        *,
        stream_id: str | None = None,
        types: Iterable[str] | None = None,
        limit: int | None = None,
        page_size: int = 5000,
        window: int = 50_000,
    ) -> Iterator[RecordedEvent]:
        """Events with ``from_position < position <= to_position`` in order, optionally filtered.

        Pages by position (keyset), so no cursor stays open while the caller works or writes. A stream
        is read through its own index; by types alone, the primary key is walked in windows of
        ``window`` positions with the types filtered row by row (never a sort of the remaining range).
        """
        type_list = sorted(set(types)) if types is not None else None
        if type_list is not None and not type_list:
            return
        where = ["position > :after", "position <= :upto"]
        params: dict[str, Any] = {}
        if stream_id is not None:
            where.append("stream_id = :stream")
            params["stream"] = stream_id
        if type_list is not None:
            params.update((f"t{i}", t) for i, t in enumerate(type_list))
            where.append(f"+type IN ({','.join(f':t{i}' for i in range(len(type_list)))})")
        sql = f"SELECT {_COLUMNS} FROM events WHERE {' AND '.join(where)} ORDER BY position LIMIT :n"
        stop = _LAST if to_position is None else to_position
        step = window if stream_id is None and type_list is not None else _LAST
        after, remaining = from_position, limit
        while remaining is None or remaining > 0:
            n = page_size if remaining is None else min(page_size, remaining)
            upto = min(stop, after + step)
            params.update(after=after, upto=upto, n=n)
            with self._lock, self.faults():
                rows = self._conn.execute(sql, params).fetchall()
            yield from _recorded(rows)
            if remaining is not None:
                remaining -= len(rows)
            if len(rows) == n:  # a full page: go on after its last event
                after = rows[-1][0]
            elif upto >= stop or upto >= self.last_position():
                return
            else:  # a window read to its end: the next one
                after = upto

    def read_rows(
        self, from_position: int, to_position: int, types: Sequence[str], window: int = 20_000, where: str | None = None
    ) -> Iterator[list[tuple[int, str, str, int, str, str]]]:
        """Raw (position, type, stream_id, schema_version, payload_json, recorded_at) rows for projections.

        Walks the primary key in windows of ``window`` positions and filters types row by row
        (``+type`` keeps SQLite off the type index, whose range-then-sort plan costs more per
        window than scanning it). Skips RecordedEvent construction: rebuilds cover millions of events.
        ``where``: an extra SQL condition on the events table (a projection's ``event_filter``).
        """
        marks = ",".join("?" * len(types))
        sql = (
            "SELECT position, type, stream_id, schema_version, payload, recorded_at FROM events"
            f" WHERE position > ? AND position <= ? AND +type IN ({marks}){f' AND ({where})' if where else ''}"
            " ORDER BY position"
        )
        for lo in range(from_position, to_position, window):
            with self._lock, self.faults():
                rows = self._conn.execute(sql, [lo, min(lo + window, to_position), *types]).fetchall()
            if rows:
                yield rows

    def read_stream(self, stream_id: str) -> list[RecordedEvent]:
        return list(self.read(stream_id=stream_id))

    def read_at(self, positions: Iterable[int]) -> list[RecordedEvent]:
        """The events at ``positions`` (by primary key), in position order; positions not stored are left out."""
        wanted = sorted(set(positions))
        out: list[RecordedEvent] = []
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            sql = f"SELECT {_COLUMNS} FROM events WHERE position IN ({','.join('?' * len(chunk))}) ORDER BY position"
            with self._lock, self.faults():
                rows = self._conn.execute(sql, chunk).fetchall()
            out += _recorded(rows)
        return out

    def latest(self, stream_id: str, type: str) -> RecordedEvent | None:
        """The stream's last event of ``type`` (walks the stream backwards by version)."""
        sql = f"SELECT {_COLUMNS} FROM events WHERE stream_id = ? AND type = ? ORDER BY version DESC LIMIT 1"
        with self._lock, self.faults():
            row = self._conn.execute(sql, (stream_id, type)).fetchone()
        return None if row is None else _recorded([row])[0]

    def tail(
        self,
        from_position: int = 0,
        *,
        types: Iterable[str] | None = None,
        stream_id: str | None = None,
        poll_interval: float = 0.2,
        stop: Callable[[], bool] | None = None,
        idle_timeout: float | None = None,
    ) -> Iterator[RecordedEvent]:
        """Follow the store: yield events after ``from_position`` as other processes append them.

        Each poll first reads the head, then the events up to it: every position up to a head once
        seen is committed (appends are serialized), so filtering by type or stream skips none.
        Ends when ``stop()`` is true, or after ``idle_timeout`` seconds with nothing new.
        """
        position = from_position
        idle_since = time.monotonic()
        type_list = list(types) if types is not None else None
        while not (stop and stop()):
            head = self.last_position()
            got = False
            for ev in self.read(position, head, stream_id=stream_id, types=type_list):
                got = True
                yield ev
                if stop and stop():
                    return
            position = head
            if got:
                idle_since = time.monotonic()
            elif idle_timeout is not None and time.monotonic() - idle_since >= idle_timeout:
                return
            else:
                time.sleep(poll_interval)

    def count(self, type: str | None = None) -> int:
        if type is None:
            return int(self.last_position())  # positions are gap-free from 1
        with self._lock, self.faults():
            return int(self._conn.execute("SELECT COUNT(*) FROM events WHERE type = ?", (type,)).fetchone()[0])

    def last_position(self) -> int:
        with self._lock, self.faults():
            return int(self._conn.execute("SELECT COALESCE(MAX(position), 0) FROM events").fetchone()[0])

    def stream_version(self, stream_id: str) -> int:
        with self._lock, self.faults():
            row = self._conn.execute("SELECT MAX(version) FROM events WHERE stream_id = ?", (stream_id,)).fetchone()
        return int(row[0] or 0)

    def type_counts(self) -> dict[str, int]:
        with self._lock, self.faults():
            return dict(self._conn.execute("SELECT type, COUNT(*) FROM events GROUP BY type ORDER BY type").fetchall())

    # -- integrity ------------------------------------------------------------------------------

    def verify_pages(self, *, again: bool = False) -> None:
        """Raise ``StoreDamaged`` when SQLite's ``quick_check`` finds damaged pages in the file. A file
        unchanged since a check found it sound is not read again (``_verdicts``) unless ``again``."""
        state = file_state(self.path)
        if not again and verified(self.path, state):
            return
        with self._lock:
            problem = integrity_problem(self._conn)
        if problem is not None:
            raise damaged(self.path, problem)
        # nothing beside an empty file, or one whose file or folder is not to be written (chmod a-w: root too)
        if self.initialised and writable(self.path) and writable(self.path.absolute().parent):
            remember(self.path, state)

    def check(self, *, validate_payloads: bool = True) -> CheckReport:
        """Verify the invariants of DESIGN §3; report the first problem found. Damaged pages are not a
        report but a ``StoreDamaged`` fault: the file's pages come before its contents."""
        from mkbsim.events._schema import known_types

        c = self._conn
        self.verify_pages(again=True)
        with self._lock, self.faults():  # validation's paged reads re-enter the lock (an RLock)
            n, lo, hi = c.execute("SELECT COUNT(*), MIN(position), MAX(position) FROM events").fetchone()
            streams = c.execute("SELECT COUNT(DISTINCT stream_id) FROM events").fetchone()[0]
            counts = self.type_counts()
            unknown = {t: k for t, k in counts.items() if t not in known_types()}

            def report(problem: str | None) -> CheckReport:
                return CheckReport(problem is None, n, streams, unknown, problem)

            if n and (lo != 1 or hi != n):
                gap = c.execute(
                    "SELECT position FROM events e WHERE position > 1 AND NOT EXISTS"
                    " (SELECT 1 FROM events p WHERE p.position = e.position - 1) ORDER BY position LIMIT 1"
                ).fetchone()
                where = f"before position {gap[0]}" if gap else f"positions start at {lo}"
                return report(f"positions are not gap-free: {n} events span {lo}..{hi}, first gap {where}")
            bad = c.execute(
                "SELECT stream_id, COUNT(*), MIN(version), MAX(version) FROM events GROUP BY stream_id"
                " HAVING MIN(version) != 1 OR MAX(version) != COUNT(*) LIMIT 1"
            ).fetchone()
            if bad:
                return report(f"stream {bad[0]!r}: {bad[1]} events with versions {bad[2]}..{bad[3]} (not 1..n)")
            row = c.execute(
                "SELECT position FROM events WHERE NOT json_valid(payload) OR json_type(payload) != 'object'"
                " ORDER BY position LIMIT 1"
            ).fetchone()
            if row:
                return report(f"position {row[0]}: payload is not a JSON object")
            if validate_payloads:
                for ev in self.read(types=[t for t in counts if t not in unknown]):
                    try:
                        validate(ev.type, ev.payload)
                    except PayloadError as exc:
                        return report(f"position {ev.position}: {exc}")
            return report(None)


def _recorded(rows: Sequence[tuple[Any, ...]]) -> list[RecordedEvent]:
    """Stored rows (the columns of ``_COLUMNS``) as events, payloads decoded and upcast."""
    version_of = versions()
    out = []
    for position, event_id, stream_id, version, type_, schema_version, recorded_at, text in rows:
        payload = decode(text)
        if schema_version < version_of.get(type_, 1):
            payload = upcast(type_, schema_version, payload)
            schema_version = version_of[type_]
        out.append(RecordedEvent(position, event_id, stream_id, version, type_, schema_version, recorded_at, payload))
    return out


def decode_payload(type_: str, schema_version: int, payload_json: str) -> dict[str, Any]:
    """Decode and upcast one stored payload (used by projections on raw rows)."""
    payload: dict[str, Any] = decode(payload_json)
    if schema_version < versions().get(type_, 1):
        payload = upcast(type_, schema_version, payload)
    return payload
