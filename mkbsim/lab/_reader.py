"""``LabReader``: one connection to a store and its projections, with the typed queries of every view.

Raw SQL over the store lives in this package and in ``mkbsim.projections`` only. A reader belongs to
one thread at a time (the connection is not shared); ``Lab.reader()`` gives another thread its own.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from mkbsim.events import EventStore, RecordedEvent, attempt_stream
from mkbsim.projections import Tables

if TYPE_CHECKING:
    from mkbsim.lab._browse import ComparisonQueries
    from mkbsim.lab._chains import ChainQueries
    from mkbsim.lab._monitor import MonitorQueries
    from mkbsim.lab._skills import SkillQueries
    from mkbsim.lab._trajectories import TrajectoryQueries
    from mkbsim.lab._transfer import TransferQueries


class Queries:
    """Base of the query groups: the reader's store, its tables and fault-translating fetches."""

    def __init__(self, reader: LabReader) -> None:
        self._reader = reader

    @property
    def t(self) -> Tables:
        return self._reader.t

    @property
    def store(self) -> EventStore:
        return self._reader.store

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.store.faults():
            return self.store.connection.execute(sql, params).fetchall()

    def _one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        with self.store.faults():
            row: tuple[Any, ...] | None = self.store.connection.execute(sql, params).fetchone()
            return row

    def _column(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return [r[0] for r in self._all(sql, params)]

    def _in_chunks(self, sql: str, keys: Iterable[Any], params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """``sql`` holds one ``{marks}`` for an IN list; ``keys`` are fetched 500 at a time (SQLite's
        variable limit), ``params`` go before them."""
        wanted = list(keys)
        out: list[tuple[Any, ...]] = []
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            out += self._all(sql.format(marks=",".join("?" * len(chunk))), [*params, *chunk])
        return out

    def _latest(self, attempt_id: str, type_: str) -> RecordedEvent | None:
        return self.store.latest(attempt_stream(attempt_id), type_)


class LabReader:
    """Typed queries over one store connection. The groups: ``transfer`` (the report's records, filter
    tests, chains' comparisons, exports), ``comparisons`` (the browser), ``monitor``, ``skills`` (skills,
    their texts, labels and what labelers read), ``chains`` and ``trajectories``."""

    def __init__(self, store: EventStore, tables: Tables) -> None:
        self.store = store
        self.t = tables

    # each group is made (and its module imported) when first used: a report reads one or two of them
    @functools.cached_property
    def transfer(self) -> TransferQueries:
        from mkbsim.lab._transfer import TransferQueries

        return TransferQueries(self)

    @functools.cached_property
    def comparisons(self) -> ComparisonQueries:
        from mkbsim.lab._browse import ComparisonQueries

        return ComparisonQueries(self)

    @functools.cached_property
    def monitor(self) -> MonitorQueries:
        from mkbsim.lab._monitor import MonitorQueries

        return MonitorQueries(self)

    @functools.cached_property
    def skills(self) -> SkillQueries:
        from mkbsim.lab._skills import SkillQueries

        return SkillQueries(self)

    @functools.cached_property
    def chains(self) -> ChainQueries:
        from mkbsim.lab._chains import ChainQueries

        return ChainQueries(self)

    @functools.cached_property
    def trajectories(self) -> TrajectoryQueries:
        from mkbsim.lab._trajectories import TrajectoryQueries

        return TrajectoryQueries(self)

    @property
    def head(self) -> int:
        return self.store.last_position()

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> LabReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
