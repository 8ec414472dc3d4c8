"""A batch's rows into the events table by multi-row ``INSERT … VALUES`` statements (DESIGN §3).

``executemany`` runs its one-row statement once per row: every row pays the statement's prologue
(the table's and both unique indexes' cursors opened and sought from their roots) and a release and
retake of the GIL around its step. A statement of many rows keeps its cursors open at the right edge,
where positions and time-ordered ids land: about 7,000 fewer instructions an event than
``executemany`` on a campaign's events (benchmarks/RESULTS.md). A batch is cut into statements of a
few fixed sizes, each prepared once per connection and kept by sqlite3's statement cache, and
``recorded_at``, one value for the whole batch, is bound once per statement (``?1``).

``OR ROLLBACK``: a row that breaks a unique constraint rolls the whole transaction back, as the store
does anyway (the batch is all or nothing). Under the default (``ABORT``) SQLite would have to undo
just the statement, so a statement of many rows would first copy every page it changes into a
statement journal: a third more CPU time per event, in the kernel too once it spills to a file.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Sequence
from typing import Any

#: rows per statement, largest first: every batch is a sum of them (the last is 1)
ROWS_PER_STATEMENT = (256, 128, 64, 32, 16, 8, 4, 2, 1)
#: the values bound per row: all the columns but ``recorded_at``
_PER_ROW = 6


@functools.cache
def _statement(rows: int) -> str:
    # row r's values are ?(6r+2) … ?(6r+7), recorded_at ?1 in its place
    values = ",".join(
        f"(?{i + 2},?{i + 3},?{i + 4},?{i + 5},?{i + 6},?1,?{i + 7})" for i in range(0, _PER_ROW * rows, _PER_ROW)
    )
    return (
        "INSERT OR ROLLBACK INTO events (event_id, stream_id, version, type, schema_version, recorded_at, payload)"
        f" VALUES {values}"
    )


def insert_events(
    conn: sqlite3.Connection,
    recorded_at: str,
    ids: Sequence[str],
    streams: Sequence[str],
    versions: Sequence[int],
    types: Sequence[str],
    schema_versions: Sequence[int],
    payloads: Sequence[str],
) -> int:
    """Insert the rows given column by column, in their order, inside the caller's transaction; the
    position of the last one (the positions of a batch are consecutive: the table's largest plus one,
    row after row). The columns are interleaved into one list of values in C (slice assignment)."""
    n = len(ids)
    values: list[Any] = [None] * (_PER_ROW * n)
    for i, column in enumerate((ids, streams, versions, types, schema_versions, payloads)):
        values[i::_PER_ROW] = column
    # an SQLite built with a lower limit on bound values than today's default (32,766) gets smaller statements
    # (one row a statement at the least: below that, SQLite's own error)
    most = max(1, (conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) - 1) // _PER_ROW)
    at, last = 0, 0
    for rows in ROWS_PER_STATEMENT:
        if rows > most:
            continue
        while n - at >= rows:
            inserted = conn.execute(_statement(rows), [recorded_at, *values[_PER_ROW * at : _PER_ROW * (at + rows)]])
            at += rows
            last = inserted.lastrowid or 0
    return last
