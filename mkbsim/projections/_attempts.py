"""The `attempts` projection: one row per attempt with its place in the design, its progress and its final
outcome (what the monitor, chains and skills views read, DESIGN §3)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import ClassVar

from mkbsim.projections._engine import Projection, ProjectionTx, Row
from mkbsim.projections._tables import ATTEMPTS

_START_COLUMNS = (
    "attempt_id", "campaign_id", "model", "problem", "family", "dsl", "arm", "replicate",
    "source_attempt_id", "chain_id", "hop", "filter",
)  # fmt: skip


class AttemptsProjection(Projection):
    name = ATTEMPTS
    version = 2
    handles = frozenset({"AttemptStarted", "SubmissionMade", "AttemptFinished"})
    tables: ClassVar[dict[str, str]] = {
        ATTEMPTS: """
            attempt_id TEXT PRIMARY KEY, campaign_id TEXT NOT NULL, model TEXT NOT NULL,
            problem TEXT NOT NULL, family TEXT NOT NULL, dsl TEXT NOT NULL, arm TEXT NOT NULL,
            replicate INTEGER NOT NULL, source_attempt_id TEXT, chain_id TEXT, hop INTEGER,
            filter TEXT, status TEXT NOT NULL DEFAULT 'running', passed INTEGER, runtime_ms REAL,
            speedup REAL, skipped INTEGER, reason TEXT, submissions INTEGER NOT NULL DEFAULT 0,
            started_position INTEGER NOT NULL, finished_position INTEGER,
            started_at TEXT NOT NULL, submission_limit INTEGER
        """,
    }
    indexes: ClassVar[dict[str, tuple[str, str]]] = {
        "by_campaign": (ATTEMPTS, "campaign_id, arm, problem"),
        "by_chain": (ATTEMPTS, "chain_id, hop"),
    }

    def apply(self, tx: ProjectionTx, rows: Sequence[Row]) -> None:
        # Batched by kind: an attempt's start precedes its submissions and its finish, so writing
        # all starts first, then counts, then finishes keeps stream order. A start for an attempt
        # already touched in this page (a retry reusing its id) flushes the batch first.
        starts: list[list[object]] = []
        finishes: list[tuple[object, ...]] = []
        submissions: Counter[str] = Counter()
        touched: set[str] = set()
        for position, type_, _, p, recorded_at in rows:
            attempt = p["attempt_id"]
            if type_ == "AttemptStarted":
                if attempt in touched:
                    self._write(tx, starts, submissions, finishes)
                    starts, finishes, submissions, touched = [], [], Counter(), set()
                limit = (p.get("budget") or {}).get("submissions")
                starts.append([*(p.get(c) for c in _START_COLUMNS), position, recorded_at,
                               limit if type(limit) is int else None])  # fmt: skip
                continue
            touched.add(attempt)
            if type_ == "SubmissionMade":
                submissions[attempt] += 1 if p["counted"] else 0
            else:
                finishes.append(
                    (p["status"], p["passed"], p["runtime_ms"], p["speedup"], p["skipped"], p.get("reason"),
                     position, attempt)
                )  # fmt: skip
        self._write(tx, starts, submissions, finishes)

    @staticmethod
    def _write(
        tx: ProjectionTx,
        starts: list[list[object]],
        submissions: Counter[str],
        finishes: list[tuple[object, ...]],
    ) -> None:
        table = tx.t[ATTEMPTS]
        if starts:
            cols = ", ".join(_START_COLUMNS)
            marks = ", ".join("?" * (len(_START_COLUMNS) + 3))
            # a retried attempt (same id) starts over
            tx.conn.executemany(
                f"INSERT INTO {table} ({cols}, started_position, started_at, submission_limit) VALUES ({marks})"
                f" ON CONFLICT(attempt_id) DO UPDATE SET status='running', passed=NULL, runtime_ms=NULL,"
                f" speedup=NULL, skipped=NULL, reason=NULL, submissions=0, finished_position=NULL,"
                f" started_position=excluded.started_position, started_at=excluded.started_at,"
                f" submission_limit=excluded.submission_limit",
                starts,
            )
        if submissions:
            tx.conn.executemany(
                f"UPDATE {table} SET submissions = submissions + ? WHERE attempt_id = ?",
                [(n, a) for a, n in submissions.items() if n],
            )
        if finishes:
            tx.conn.executemany(
                f"UPDATE {table} SET status=?, passed=?, runtime_ms=?, speedup=?, skipped=?, reason=?,"
                " finished_position=? WHERE attempt_id = ?",
                finishes,
            )
