"""Sentence embeddings kept between runs: an SQLite file of vectors by model and by the sentence's SHA-256.

A sentence is embedded once, ever, for a given model: reports and chains on a large store read its
vectors back instead of running the model again (embedding tens of thousands of sentences takes minutes
on a CPU; reading them back takes a second). The file lives beside the store (``<store>-embeddings``,
like SQLite's own ``-wal``), so it travels with it; where the store's folder cannot be written, in the
user's cache folder; where neither can be, in memory for the run.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

SUFFIX = "-embeddings"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    model  TEXT NOT NULL,
    sha256 BLOB NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, sha256)
) WITHOUT ROWID
"""


def sentence_key(sentence: str) -> bytes:
    return hashlib.sha256(sentence.encode()).digest()


class EmbeddingCache:
    """Vectors (raw bytes; the caller knows their type) of sentences, by model. ``path`` None: memory only."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._memory: dict[tuple[str, bytes], bytes] = {}
        self._conn: sqlite3.Connection | None = None
        if path is not None:
            conn = sqlite3.connect(path, timeout=30, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute(_SCHEMA)
            except BaseException:
                conn.close()
                raise
            self._conn = conn

    @property
    def where(self) -> str:
        return str(self.path) if self.path is not None else "memory, for this run only"

    def get(self, model: str, sentences: Iterable[str]) -> dict[str, bytes]:
        """The stored vectors of those of ``sentences`` that have one."""
        keys = {sentence_key(s): s for s in sentences}
        if self._conn is None:
            return {s: self._memory[(model, k)] for k, s in keys.items() if (model, k) in self._memory}
        found: dict[str, bytes] = {}
        wanted = list(keys)
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            rows = self._conn.execute(
                f"SELECT sha256, vector FROM embeddings WHERE model = ? AND sha256 IN ({','.join('?' * len(chunk))})",
                [model, *chunk],
            )
            found.update((keys[k], v) for k, v in rows)
        return found

    def put(self, model: str, vectors: Mapping[str, bytes]) -> None:
        rows = [(model, sentence_key(s), v) for s, v in vectors.items()]
        if self._conn is None:
            self._memory.update(((m, k), v) for m, k, v in rows)
            return
        self._conn.execute("BEGIN IMMEDIATE")
        self._conn.executemany("INSERT OR IGNORE INTO embeddings VALUES (?, ?, ?)", rows)
        self._conn.execute("COMMIT")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


def cache_for(store: Path, candidates: Sequence[Path] | None = None) -> EmbeddingCache:
    """The embedding cache of ``store``: beside it, else in the user's cache folder, else in memory.
    ``candidates`` replaces those two places (tests)."""
    for path in candidates if candidates is not None else (Path(f"{store}{SUFFIX}"), _user_cache()):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return EmbeddingCache(path)
        except (OSError, sqlite3.Error):
            continue
    return EmbeddingCache(None)


def _user_cache() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "mkbsim" / "embeddings.sqlite"
