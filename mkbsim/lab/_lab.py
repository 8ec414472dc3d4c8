"""``Lab``: the read model over one store (DESIGN §3). It owns the projection engine, brings the
projections up to the store's head once when it opens, and hands out readers for other threads.

A store this process cannot write (a read-only file or folder, or ``readonly=True``) is never
written. Where its stored projections are current, they are read as they are; where they lag (or were
never built, or are of another version), the Lab computes them from the events into a private scratch
database in the temporary folder, attached to every connection it makes, starting from the stored
tables that are current up to their checkpoint. ``freshness()`` says which happened and how far behind
the stored projections are. The scratch database is deleted when the Lab closes.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from mkbsim.errors import MkbsimError
from mkbsim.events import CHECKPOINT_COLUMNS, CHECKPOINTS, EventStore, writable
from mkbsim.lab._reader import LabReader
from mkbsim.projections import Projection, ProjectionEngine, ProjectionStatus, Tables, default_projections

SCRATCH = "scratch"


@dataclass(frozen=True)
class Freshness:
    """Where the Lab's views come from, relative to the store's head."""

    head: int
    readonly: bool
    #: events the store holds beyond what its least current stored projection applied (a projection
    #: never built, or built by another version, counts the whole store)
    stored_lag: int
    #: the views were computed into the scratch database (a read-only store with lagging projections)
    computed: bool

    def note(self) -> str | None:
        """One line for a read-only store holding events (None otherwise)."""
        if not self.readonly or not self.head:
            return None
        if not self.computed:
            return "read-only store: its projections are current; nothing was written"
        return (f"read-only store: its projections are {self.stored_lag:,} events behind; computed from the "
                "events without writing to it")  # fmt: skip


class Lab(LabReader):
    """The read model of one store. ``readonly`` None: read-only exactly when the store cannot be
    written or holds no event tables yet. ``catch_up`` False leaves bringing the projections current
    to ``refresh`` (a watcher thread that reports progress first)."""

    def __init__(self, path: str | Path, *, readonly: bool | None = None, catch_up: bool = True) -> None:
        self.path = Path(path)
        ro = (not writable(self.path) or not _initialised(self.path)) if readonly is None else readonly
        super().__init__(EventStore(self.path, readonly=ro), Tables())
        self.projections: list[Projection] = default_projections()
        self.engine = ProjectionEngine(self.store, self.projections)
        self._scratch: Path | None = None
        self._verifying: threading.Thread | None = None
        self._damage: MkbsimError | None = None
        #: bumped when the Lab moves its views to the scratch database: readers made before see the old ones
        self.generation = 0
        try:
            if ro and not self._stored_current():
                self._use_scratch()
            if catch_up:
                self.refresh()
        except BaseException:
            self.close()
            raise

    @property
    def readonly(self) -> bool:
        return self.store.readonly

    def pending(self) -> int:
        """Events the views have yet to apply (a projection to rebuild counts the whole store)."""
        if not self.store.initialised and self._scratch is None:
            return 0
        head = self.store.last_position()
        return max((s.lag if s.stored_version == s.version else head for s in self.engine.status()), default=0)

    def refresh(self) -> int:
        """Bring the views up to the store's head; the number of events applied."""
        if self.readonly and self._scratch is None:
            if self._stored_current():
                return 0
            self._use_scratch()
        return sum(self.engine.catch_up().values())

    def freshness(self) -> Freshness:
        return Freshness(self.store.last_position(), self.readonly, self._stored_lag(), self._scratch is not None)

    def verify(self) -> None:
        """Raise ``StoreDamaged`` when SQLite's integrity check finds damaged pages: call it before
        reporting numbers read from the projections (they may be intact where the events are not).
        After ``start_verify``, waits for that check's verdict."""
        if self._verifying is None:
            self.store.verify_pages()
            return
        self._verifying.join()
        self._verifying = None
        if self._damage is not None:
            raise self._damage

    def start_verify(self) -> None:
        """Begin the integrity check on a connection of its own, in a thread (SQLite works without the GIL),
        so it overlaps the caller's reads; ``verify`` gives its verdict. Only while nothing is written:
        a damaged file must not be written to."""
        def check() -> None:
            try:
                with EventStore(self.path, readonly=True) as store:
                    store.verify_pages()
            except MkbsimError as exc:
                self._damage = exc

        self._verifying = threading.Thread(target=check, name="mkbsim-lab-verify", daemon=True)
        self._verifying.start()

    def reader(self) -> LabReader:
        """A reader on a connection of its own (for another thread), seeing the same views. It never writes."""
        store = EventStore(self.path, readonly=True)
        if self._scratch is not None:
            with store.faults():
                _attach(store.connection, self._scratch)
        return LabReader(store, self.t)

    def close(self) -> None:
        super().close()
        if self._scratch is not None:
            shutil.rmtree(self._scratch.parent, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    # -- the stored projections and the scratch database --------------------------------------

    def stored_status(self) -> list[ProjectionStatus]:
        """Each projection's checkpoint and lag as stored in the store file (whatever the Lab computed apart)."""
        if not self.store.initialised:
            head = self.store.last_position()
            return [ProjectionStatus(p.name, p.version, None, head, None) for p in self.projections]
        return ProjectionEngine(self.store, self.projections).status()

    def _built(self) -> set[str]:
        """The stored projections of this version whose tables exist."""
        if not self.store.initialised:
            return set()
        with self.store.faults():
            tables = self.store.connection.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'")
            have = {r[0] for r in tables}
        return {
            s.name
            for s, p in zip(self.stored_status(), self.projections, strict=True)
            if s.stored_version == s.version and all(t in have for t in p.tables)
        }

    def _stored_lag(self) -> int:
        """How far the least current stored projection lags the head (one not built: the whole store)."""
        head = self.store.last_position()
        built = self._built()
        return max((s.lag if s.name in built else head for s in self.stored_status()), default=0)

    def _stored_current(self) -> bool:
        return self.store.initialised and len(self._built()) == len(self.projections) and self._stored_lag() == 0

    def _use_scratch(self) -> None:
        folder = Path(tempfile.mkdtemp(prefix="mkbsim-lab-"))
        self._scratch = folder / "projections.sqlite"
        conn = self.store.connection
        with self.store.faults():
            _attach(conn, self._scratch)
            conn.execute(f"PRAGMA {SCRATCH}.journal_mode = WAL")  # readers in other threads read while it grows
            conn.execute(f"CREATE TABLE {SCRATCH}.{CHECKPOINTS} ({CHECKPOINT_COLUMNS})")
            if self.store.initialised:
                self._copy_current_projections(conn)
        self.engine = ProjectionEngine(self.store, self.projections, schema=SCRATCH)
        self.t = Tables(SCRATCH)
        self.generation += 1

    def _copy_current_projections(self, conn: sqlite3.Connection) -> None:
        """Start from the stored projections of this version: only their lag is computed."""
        built = self._built()
        for p in self.projections:
            if p.name not in built:
                continue
            conn.execute("BEGIN")
            for table, columns in p.tables.items():
                conn.execute(f"CREATE TABLE {SCRATCH}.{table} ({columns})")
                conn.execute(f"INSERT INTO {SCRATCH}.{table} SELECT * FROM main.{table}")
            for suffix, (table, columns) in p.indexes.items():
                conn.execute(f"CREATE INDEX {SCRATCH}.{table}_{suffix} ON {table} ({columns})")
            conn.execute(f"INSERT INTO {SCRATCH}.{CHECKPOINTS} SELECT * FROM main.{CHECKPOINTS} WHERE name = ?",
                         (p.name,))  # fmt: skip
            conn.execute("COMMIT")


def _initialised(path: Path) -> bool:
    """Whether the file holds the event tables: a reader never writes them into a file (a zero-length one,
    one a campaign is still creating); its views then come from the scratch database."""
    with EventStore(path, readonly=True) as store:
        return store.initialised


def _attach(conn: sqlite3.Connection, scratch: Path) -> None:
    conn.execute(f"ATTACH DATABASE ? AS {SCRATCH}", (str(scratch),))
