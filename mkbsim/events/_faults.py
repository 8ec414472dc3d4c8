"""SQLite errors as the store faults of ``mkbsim.errors``: one class and one line per kind (DESIGN §9).

A failed statement whose error names no cause (busy, full, read-only) is followed by SQLite's
``PRAGMA quick_check``: when that finds damaged pages, the fault is ``StoreDamaged``, so a caller
never reports anything from a store whose file is damaged.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from mkbsim.errors import StoreBusy, StoreDamaged, StoreError, StoreFull, StoreReadOnly

#: What ``integrity_problem`` reports at most (quick_check lists every damaged page otherwise).
_PROBLEMS_SHOWN = 1


def integrity_problem(conn: sqlite3.Connection) -> str | None:
    """SQLite's first complaint about the store file's pages (``PRAGMA quick_check``), or None if sound."""
    try:
        row = conn.execute(f"PRAGMA main.quick_check({_PROBLEMS_SHOWN})").fetchone()
    except sqlite3.DatabaseError as exc:  # the check itself can trip over a damaged page
        return str(exc)
    return None if row is None or row[0] == "ok" else str(row[0])


def damaged(path: Path, problem: str) -> StoreDamaged:
    return StoreDamaged(
        f"{path}: the store file is damaged ({problem.strip()}); nothing read from it is reported "
        "(restore it from a copy)"
    )


def store_fault(exc: sqlite3.Error, path: Path, conn: sqlite3.Connection | None = None) -> StoreError:
    """The fault ``exc`` stands for. ``conn``: the failing connection, checked for damage when the
    error itself does not say what went wrong."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    message = str(exc)
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "database is locked" in message:
        return StoreBusy(f"{path}: the store is locked by another process (try again later)")
    if name == "SQLITE_FULL" or "disk is full" in message:
        return StoreFull(f"{path}: the disk is full; the transaction that failed wrote nothing")
    if name.startswith("SQLITE_READONLY") or "readonly database" in message or _cannot_write(name, path):
        return StoreReadOnly(f"{path}: the store is read-only and this command writes to it")
    if name == "SQLITE_INTERRUPT":
        return StoreError(f"{path}: interrupted")
    problem = integrity_problem(conn) if conn is not None else None
    if problem is not None:
        return damaged(path, problem)
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or "malformed" in message:
        return damaged(path, message)
    return StoreError(f"{path}: {message}")


@contextlib.contextmanager
def faults_as_errors(path: Path, conn: sqlite3.Connection | None = None) -> Iterator[None]:
    """Raise any SQLite error inside as the store fault it stands for."""
    try:
        yield
    except sqlite3.Error as exc:
        raise store_fault(exc, path, conn) from exc


def writable(path: Path) -> bool:
    """Whether SQLite can write the store: the file and its folder (which holds the -wal and -shm files)."""
    folder = path.absolute().parent
    return os.access(folder, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))


def _cannot_write(name: str, path: Path) -> bool:
    # opening a WAL store needs its -shm file: in a folder that cannot be written, that open fails
    return name.startswith("SQLITE_CANTOPEN") and path.exists() and not writable(path)
