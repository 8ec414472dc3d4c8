"""The projection engine: incremental catch-up from a checkpoint, or full rebuild and swap.

A projection's tables live in the store's own SQLite file, so its update and its checkpoint row
commit in one transaction: a crash never applies an event twice or skips one (DESIGN §3).
"""

from __future__ import annotations

import contextlib
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

from mkbsim.events import CHECKPOINTS, EventStore, decode_payload

#: (position, type, stream_id, payload, recorded_at) — what a projection's ``apply`` receives, in position order.
Row = tuple[int, str, str, dict[str, Any], str]

_REBUILD_SUFFIX = "__rebuild"


class ProjectionTx:
    """What ``apply`` writes through: the connection and the physical name of each logical table."""

    def __init__(self, conn: sqlite3.Connection, tables: Mapping[str, str]) -> None:
        self.conn = conn
        self.t = dict(tables)


class Projection(ABC):
    """A read model over the event store.

    ``tables`` maps a logical table name to its column definitions (the body of CREATE TABLE,
    PRIMARY KEY/UNIQUE allowed); ``indexes`` maps an index suffix to ``(table, columns)``. Bump
    ``version`` when the tables or the logic change: the engine then rebuilds from scratch.
    """

    name: ClassVar[str]
    version: ClassVar[int] = 1
    handles: ClassVar[frozenset[str]]
    tables: ClassVar[dict[str, str]]
    indexes: ClassVar[dict[str, tuple[str, str]]] = {}
    #: An SQL condition on the events table narrowing what ``apply`` receives within ``handles``;
    #: SQLite evaluates it, so events the projection would ignore are never JSON-decoded.
    event_filter: ClassVar[str | None] = None

    @abstractmethod
    def apply(self, tx: ProjectionTx, rows: Sequence[Row]) -> None:
        """Apply a page of events (only the types in ``handles``), in position order."""


@dataclass(frozen=True)
class ProjectionStatus:
    name: str
    version: int
    position: int | None
    head: int
    stored_version: int | None

    @property
    def lag(self) -> int:
        return self.head - (self.position or 0)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class ProjectionEngine:
    """Keeps projections current over one store, through the store's writer connection.

    ``schema`` names the SQLite schema holding the projections' tables and checkpoints: ``main`` (the
    store file itself) or a scratch database attached to the connection, where a read-only store's
    lagging projections are computed without writing to it (``mkbsim.lab``). SQLite errors are raised
    as store faults (``mkbsim.errors``).
    """

    def __init__(
        self, store: EventStore, projections: Iterable[Projection], *, page_size: int = 50_000, schema: str = "main"
    ):
        self.store = store
        self.projections = {p.name: p for p in projections}
        self.page_size = page_size
        self.schema = schema

    @property
    def conn(self) -> sqlite3.Connection:
        return self.store.connection

    def table(self, name: str) -> str:
        """The physical (schema-qualified) name of a projection table."""
        return f"{self.schema}.{name}"

    def status(self) -> list[ProjectionStatus]:
        head = self.store.last_position()
        out = []
        with self.store.faults():
            for p in self.projections.values():
                row = self._checkpoint(p)
                out.append(ProjectionStatus(p.name, p.version, row[0] if row else None, head, row[1] if row else None))
        return out

    def catch_up(self, names: Iterable[str] | None = None) -> dict[str, int]:
        """Bring projections up to the store's head; returns events applied per projection.

        A projection that was never built, whose version changed, or whose tables are missing is
        rebuilt instead.
        """
        applied = {}
        for p in self._select(names):
            with self.store.faults():
                row = self._checkpoint(p)
                current = row is not None and row[1] == p.version and self._tables_exist(p)
            if not current or row is None:
                applied[p.name] = self.rebuild(p.name)
            else:
                tables = {t: self.table(t) for t in p.tables}
                with self.store.faults():
                    applied[p.name] = self._advance(p, tables, row[0], checkpoint=True)
        return applied

    def rebuild(self, name: str) -> int:
        """Rebuild into fresh tables in the connection's TEMP schema, then copy them into place in one
        transaction: readers never see a half-built view, and a rebuild that fails (a full disk, an
        interrupt) leaves nothing of itself in the store."""
        p = self.projections[name]
        fresh = {t: f"temp.{t}{_REBUILD_SUFFIX}" for t in p.tables}
        with self.store.faults():
            try:
                return self._rebuild(p, fresh)
            except BaseException:
                self._drop_quietly(fresh.values())
                raise

    def drop(self, name: str) -> None:
        p = self.projections[name]
        with self.store.faults(), self._tx():
            for logical in p.tables:
                self.conn.execute(f"DROP TABLE IF EXISTS {self.table(logical)}")
            self.conn.execute(f"DELETE FROM {self.table(CHECKPOINTS)} WHERE name = ?", (p.name,))

    # -- internals -----------------------------------------------------------------------------

    def _rebuild(self, p: Projection, fresh: Mapping[str, str]) -> int:
        with self._tx():
            for physical in fresh.values():
                self.conn.execute(f"DROP TABLE IF EXISTS {physical}")
            for logical, physical in fresh.items():
                self.conn.execute(f"CREATE TABLE {physical} ({p.tables[logical]})")
        head = self.store.last_position()
        n = self._advance(p, fresh, 0, checkpoint=False, to_position=head)
        with self._tx():
            # events that arrived during the rebuild, under the same lock as the swap
            n += self._apply_range(p, fresh, head, self.store.last_position())
            for logical, physical in fresh.items():
                self.conn.execute(f"DROP TABLE IF EXISTS {self.table(logical)}")
                self.conn.execute(f"CREATE TABLE {self.table(logical)} ({p.tables[logical]})")
                self.conn.execute(f"INSERT INTO {self.table(logical)} SELECT * FROM {physical}")
                self.conn.execute(f"DROP TABLE {physical}")
            for suffix, (table, columns) in p.indexes.items():
                index = self.table(f"{table}_{suffix}")
                self.conn.execute(f"CREATE INDEX IF NOT EXISTS {index} ON {table} ({columns})")
            self._set_checkpoint(p, self.store.last_position())
        return n

    def _drop_quietly(self, tables: Iterable[str]) -> None:
        """Free the TEMP space of a failed rebuild's tables (they would go with the connection anyway)."""
        with contextlib.suppress(sqlite3.Error):
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            with self._tx():
                for physical in tables:
                    self.conn.execute(f"DROP TABLE IF EXISTS {physical}")

    def _checkpoint(self, p: Projection) -> tuple[int, int] | None:
        row = self.conn.execute(
            f"SELECT position, version FROM {self.table(CHECKPOINTS)} WHERE name = ?", (p.name,)
        ).fetchone()
        return None if row is None else (int(row[0]), int(row[1]))

    def _select(self, names: Iterable[str] | None) -> list[Projection]:
        if names is None:
            return list(self.projections.values())
        return [self.projections[n] for n in names]

    def _tables_exist(self, p: Projection) -> bool:
        have = {r[0] for r in self.conn.execute(f"SELECT name FROM {self.schema}.sqlite_master WHERE type='table'")}
        return all(t in have for t in p.tables)

    def _advance(
        self,
        p: Projection,
        tables: Mapping[str, str],
        from_position: int,
        *,
        checkpoint: bool,
        to_position: int | None = None,
    ) -> int:
        """Apply events after ``from_position`` page by page, each page in its own transaction."""
        head = self.store.last_position() if to_position is None else to_position
        n = 0
        position = from_position
        while position < head:
            upto = min(head, position + self.page_size)
            with self._tx():
                n += self._apply_range(p, tables, position, upto)
                if checkpoint:
                    self._set_checkpoint(p, upto)
            position = upto
        return n

    def _apply_range(self, p: Projection, tables: Mapping[str, str], lo: int, hi: int) -> int:
        if hi <= lo:
            return 0
        n = 0
        tx = ProjectionTx(self.conn, tables)
        for page in self.store.read_rows(lo, hi, sorted(p.handles), where=p.event_filter):
            rows = [(pos, typ, stream, decode_payload(typ, sv, js), at) for pos, typ, stream, sv, js, at in page]
            p.apply(tx, rows)
            n += len(rows)
        return n

    def _set_checkpoint(self, p: Projection, position: int) -> None:
        self.conn.execute(
            f"INSERT INTO {self.table(CHECKPOINTS)} (name, position, version, updated_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT(name) DO UPDATE SET position = excluded.position, version = excluded.version,"
            " updated_at = excluded.updated_at",
            (p.name, position, p.version, _now()),
        )

    def _tx(self) -> _Transaction:
        return _Transaction(self.conn)


class _Transaction:
    """BEGIN IMMEDIATE … COMMIT, rolled back on any exception (including KeyboardInterrupt)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.conn.execute("COMMIT")
        elif self.conn.in_transaction:  # SQLite already rolled back on some errors (e.g. disk full)
            self.conn.execute("ROLLBACK")
