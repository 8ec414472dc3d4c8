"""Opening the store for the TUI: a one-line verdict on a bad path, and the UI thread's read connection."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from mkbsim.events import EventStore, StoreError


@dataclass(frozen=True)
class StoreCheck:
    """What opening the store found: ``problem`` is a sentence for the user, or None when usable."""

    path: Path
    problem: str | None
    head: int


def check_store(path: Path) -> StoreCheck:
    """Open the store the way every mkbsim command does and report why it cannot be used, if it cannot."""
    if path.is_dir():
        return StoreCheck(path, f"{path}: is a directory, not an event store file", 0)
    try:
        with EventStore(path) as store:
            return StoreCheck(path, None, store.last_position())
    except StoreError as exc:
        return StoreCheck(path, str(exc), 0)


def open_reader(path: Path) -> sqlite3.Connection:
    """A read-only connection for the UI thread (projection writes happen in the watcher thread)."""
    conn = sqlite3.connect(path, timeout=5.0)
    conn.execute("PRAGMA query_only = ON")
    return conn


def has_tables(conn: sqlite3.Connection, *names: str) -> bool:
    placeholders = ",".join("?" * len(names))
    found = conn.execute(
        f"SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN ({placeholders})", names
    ).fetchone()[0]
    return int(found) == len(names)
