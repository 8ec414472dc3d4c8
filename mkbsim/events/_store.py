"""The SQLite event store (DESIGN §3): append-only, gap-free positions, per-stream versions."""

from __future__ import annotations

import contextlib
import json
import json.encoder
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from mkbsim.errors import ConcurrencyError, MkbsimError, NotAStore, PayloadError, StoreMissing, UnknownEventType
from mkbsim.events._faults import damaged, faults_as_errors, integrity_problem, store_fault
from mkbsim.events._ids import new_event_ids
from mkbsim.events._schema import Payload, current_version, upcast, validate

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
_DDL = (
    _TABLES
    + """
CREATE INDEX IF NOT EXISTS events_by_type ON events (type, position);
CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'events are immutable'); END;
"""
)
#: An uninitialised file read without writing: the same tables, empty, in the connection's TEMP schema.
_EMPTY_VIEW = _TABLES.replace("CREATE TABLE IF NOT EXISTS", "CREATE TEMP TABLE IF NOT EXISTS")


def _make_encoder() -> Callable[[Any], str]:
    """Compact, NaN-refusing JSON. Built once: json.dumps with options builds an encoder per call,
    and JSONEncoder.encode builds the C encoder per call (~0.9 µs of a ~10 µs append)."""
    encoder = json.JSONEncoder(separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    make_c = getattr(json.encoder, "c_make_encoder", None)
    if make_c is None:  # a Python without the C accelerator
        return encoder.encode
    c_encode = make_c(None, encoder.default, json.encoder.encode_basestring, None, ":", ",", False, False, False)
    return lambda obj: "".join(c_encode(obj, 0))


_encode = _make_encoder()
_COLUMNS = "position, event_id, stream_id, version, type, schema_version, recorded_at, payload"


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


@dataclass(frozen=True, slots=True)
class RecordedEvent:
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
        uri = f"{self.path.absolute().as_uri()}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=timeout, check_same_thread=False)
        try:
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError as exc:
            conn.close()
            # a WAL store in a folder that cannot be written: its -shm file cannot be made; with no
            # unapplied log beside it, the file alone is the whole store and nobody can change it
            log = Path(f"{self.path}-wal")
            if exc.sqlite_errorname != "SQLITE_CANTOPEN" or (log.exists() and log.stat().st_size > 0):
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
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")
        if version < STORE_SCHEMA:
            conn.executescript(_DDL + f"PRAGMA user_version = {STORE_SCHEMA};")
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
        recorded_at = _now()
        fresh_ids = iter(new_event_ids(sum(1 for ev in batch if ev.event_id is None)))
        rows: list[list[Any]] = []
        caller_ids: list[str] = []
        for i, ev in enumerate(batch):
            try:
                validate(ev.type, ev.payload)
                payload_json = _encode(ev.payload)
            except UnknownEventType:
                raise
            except PayloadError as exc:
                raise PayloadError(f"event {i} ({ev.stream_id}): {exc}") from None
            except (TypeError, ValueError) as exc:
                raise PayloadError(f"event {i} ({ev.stream_id}) {ev.type}: payload is not JSON: {exc}") from None
            if ev.event_id is None:
                event_id = next(fresh_ids)
            else:
                event_id = ev.event_id
                caller_ids.append(event_id)
            rows.append([event_id, ev.stream_id, 0, ev.type, current_version(ev.type), recorded_at, payload_json])
        if len(set(caller_ids)) != len(caller_ids):
            twice = next(i for i in caller_ids if caller_ids.count(i) > 1)
            raise PayloadError(f"event_id {twice!r} appears twice in one batch")
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
        rows: list[list[Any]],
        caller_ids: list[str],
        expected_version: int | Mapping[str, int] | None,
    ) -> AppendResult:
        duplicates = 0
        if caller_ids:
            stored = self._existing_ids(conn, caller_ids)
            if stored:
                rows = [r for r in rows if r[0] not in stored]
                duplicates = sum(1 for i in caller_ids if i in stored)
                if not rows:
                    return AppendResult(0, duplicates, None, None)
        heads: dict[str, int] = {}
        for r in rows:
            if r[1] not in heads:
                head = conn.execute("SELECT MAX(version) FROM events WHERE stream_id = ?", (r[1],)).fetchone()[0]
                heads[r[1]] = head or 0
        if expected_version is not None:
            if isinstance(expected_version, int):
                if len(heads) != 1:
                    raise ConcurrencyError("an int expected_version needs a batch on a single stream")
                expected = dict.fromkeys(heads, expected_version)
            else:
                expected = dict(expected_version)
            for stream, want in expected.items():
                have = heads.get(stream)
                if have is None:
                    row = conn.execute("SELECT MAX(version) FROM events WHERE stream_id = ?", (stream,)).fetchone()
                    have = row[0] or 0
                if have != want:
                    raise ConcurrencyError(f"stream {stream!r} is at version {have}, expected {want}")
        for r in rows:
            heads[r[1]] += 1
            r[2] = heads[r[1]]
        first = (conn.execute("SELECT MAX(position) FROM events").fetchone()[0] or 0) + 1
        conn.executemany(
            "INSERT INTO events (event_id, stream_id, version, type, schema_version, recorded_at, payload)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        return AppendResult(len(rows), duplicates, first, first + len(rows) - 1)

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
    ) -> Iterator[RecordedEvent]:
        """Events with ``from_position < position <= to_position`` in order, optionally filtered.

        Pages by position (keyset), so no cursor stays open while the caller works or writes.
        """
        where = ["position > ?"]
        base: list[Any] = []
        if to_position is not None:
            where.append("position <= ?")
            base.append(to_position)
        if stream_id is not None:
            where.append("stream_id = ?")
            base.append(stream_id)
        type_list = sorted(set(types)) if types is not None else None
        if type_list is not None:
            if not type_list:
                return
            where.append(f"type IN ({','.join('?' * len(type_list))})")
            base.extend(type_list)
        sql = f"SELECT {_COLUMNS} FROM events WHERE {' AND '.join(where)} ORDER BY position LIMIT ?"
        cursor = from_position
        remaining = limit
        while remaining is None or remaining > 0:
            n = page_size if remaining is None else min(page_size, remaining)
            with self._lock, self.faults():
                rows = self._conn.execute(sql, [cursor, *base, n]).fetchall()
            for row in rows:
                yield _decode(row)
            if len(rows) < n:
                return
            cursor = rows[-1][0]
            if remaining is not None:
                remaining -= len(rows)

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
            out.extend(_decode(row) for row in rows)
        return out

    def latest(self, stream_id: str, type: str) -> RecordedEvent | None:
        """The stream's last event of ``type`` (walks the stream backwards by version)."""
        sql = f"SELECT {_COLUMNS} FROM events WHERE stream_id = ? AND type = ? ORDER BY version DESC LIMIT 1"
        with self._lock, self.faults():
            row = self._conn.execute(sql, (stream_id, type)).fetchone()
        return None if row is None else _decode(row)

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

    def verify_pages(self) -> None:
        """Raise ``StoreDamaged`` when SQLite's ``quick_check`` finds damaged pages in the file."""
        with self._lock:
            problem = integrity_problem(self._conn)
        if problem is not None:
            raise damaged(self.path, problem)

    def check(self, *, validate_payloads: bool = True) -> CheckReport:
        """Verify the invariants of DESIGN §3; report the first problem found. Damaged pages are not a
        report but a ``StoreDamaged`` fault: the file's pages come before its contents."""
        from mkbsim.events._schema import known_types

        c = self._conn
        self.verify_pages()
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


def _decode(row: tuple[Any, ...]) -> RecordedEvent:
    position, event_id, stream_id, version, type_, schema_version, recorded_at, payload_json = row
    payload = decode_payload(type_, schema_version, payload_json)
    schema_version = max(schema_version, current_version(type_))
    return RecordedEvent(position, event_id, stream_id, version, type_, schema_version, recorded_at, payload)


def decode_payload(type_: str, schema_version: int, payload_json: str) -> dict[str, Any]:
    """JSON-decode and upcast one stored payload (used by projections on raw rows)."""
    payload: dict[str, Any] = json.loads(payload_json)
    if schema_version < current_version(type_):
        payload = upcast(type_, schema_version, payload)
    return payload
