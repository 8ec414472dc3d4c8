"""The `comparisons` projection: every skill-conditioned attempt paired with its baseline and source.

Treatments' comparisons go to the ``comparisons`` table, which every report of the study reads; the control
arms' (DESIGN §4: ``aa``, ``placebo``, ``matched``, paired with their treatment's baseline) go to
``control_comparisons``, with the same columns (``arm`` names the control).

It keeps its own per-attempt outcome table (``transfer_attempts``) rather than reading the `attempts`
projection, so each projection rebuilds on its own; that table also records whether the final kernel
used inline CUDA (from the final VerifierResult), which scored verdicts exclude (DESIGN §5), and its plan kind
(``full`` or ``partial``: whether eager code made the problem's products; verifier README, "Plan kinds").

A page of events touches some attempts; every slot (campaign, model, problem, replicate) holding one
of them, or holding a treatment that names one as its source or baseline, has its comparisons
recomputed from the stored attempts by ``mkbsim.metrics.pair_slot``. The result depends only on the
events applied, never on how they were paged, so catch-up equals rebuild.
"""

from __future__ import annotations

import dataclasses
import operator
import sqlite3
from collections.abc import Iterable, Sequence
from typing import ClassVar

from mkbsim.metrics import COMPARISON_FIELDS, TransferAttempt, pair_slot
from mkbsim.projections._engine import Projection, ProjectionTx, Row
from mkbsim.projections._tables import COMPARISONS, CONTROL_COMPARISONS, TRANSFER_ATTEMPTS

ATTEMPT_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(TransferAttempt))
_START_FIELDS = ATTEMPT_FIELDS[: ATTEMPT_FIELDS.index("status")]
_STATUS, _PASSED, _INLINE, _RUNTIME, _SPEEDUP, _SKIPPED, _FINISHED, _PLAN = (
    ATTEMPT_FIELDS.index(f)
    for f in ("status", "passed", "inline_cuda", "runtime_ms", "speedup", "skipped", "finished_position", "plan")
)
_SLOT = ("campaign_id", "model", "problem", "replicate")
_comparison_row = operator.attrgetter(*COMPARISON_FIELDS)

Slot = tuple[str, str, str, int]
_COMPARISON_COLUMNS = """
            campaign_id TEXT NOT NULL, model TEXT NOT NULL, problem TEXT NOT NULL, family TEXT NOT NULL,
            direction TEXT NOT NULL, arm TEXT NOT NULL, replicate INTEGER NOT NULL, filter TEXT, chain_id TEXT,
            hop INTEGER, treatment_attempt_id TEXT NOT NULL, baseline_attempt_id TEXT, source_attempt_id TEXT,
            resolved INTEGER NOT NULL, skipped INTEGER,
            baseline_passed INTEGER, baseline_runtime_ms REAL, baseline_speedup REAL, baseline_tier INTEGER,
            treatment_passed INTEGER, treatment_runtime_ms REAL, treatment_speedup REAL, treatment_tier INTEGER,
            source_passed INTEGER, source_speedup REAL, source_tier INTEGER,
            r REAL, outcome TEXT, verdict_change TEXT, standing TEXT,
            UNIQUE (campaign_id, model, problem, replicate, direction, arm, filter, chain_id, hop)
        """


#: the columns the report reads of a plain resolved comparison, in the order it reads them
#: (``mkbsim.lab``); with the filter before them, an index on these is the report's whole read
REPORT_ORDER = "campaign_id, model, problem, direction, replicate"
REPORT_COLUMNS = "family, r, outcome, verdict_change, skipped, standing"


class ComparisonsProjection(Projection):
    name = COMPARISONS
    version = 5
    handles = frozenset({"AttemptStarted", "VerifierResult", "AttemptFinished"})
    # only the final verdict's inline-CUDA flag and plan kind matter; per-submission results are most of the events
    event_filter = "type != 'VerifierResult' OR json_extract(payload, '$.submission') = 'final'"
    # The UNIQUE constraints are there for their indexes: the engine creates ``indexes`` only after a
    # rebuild, but pairing looks attempts up by slot and by reference during the rebuild too.
    tables: ClassVar[dict[str, str]] = {
        TRANSFER_ATTEMPTS: """
            attempt_id TEXT PRIMARY KEY, campaign_id TEXT NOT NULL, model TEXT NOT NULL, problem TEXT NOT NULL,
            family TEXT NOT NULL, dsl TEXT NOT NULL, arm TEXT NOT NULL, replicate INTEGER NOT NULL,
            source_attempt_id TEXT, baseline_attempt_id TEXT, chain_id TEXT, hop INTEGER, filter TEXT,
            status TEXT NOT NULL, passed INTEGER, inline_cuda INTEGER NOT NULL, runtime_ms REAL, speedup REAL,
            skipped INTEGER, started_position INTEGER NOT NULL, finished_position INTEGER, plan TEXT,
            UNIQUE (campaign_id, model, problem, replicate, attempt_id),
            UNIQUE (source_attempt_id, attempt_id),
            UNIQUE (baseline_attempt_id, attempt_id)
        """,
        COMPARISONS: _COMPARISON_COLUMNS,
        CONTROL_COMPARISONS: _COMPARISON_COLUMNS,
    }

    indexes: ClassVar[dict[str, tuple[str, str]]] = {
        "by_treatment": (COMPARISONS, "treatment_attempt_id"),
        "by_chain": (COMPARISONS, "chain_id, hop"),
        "controls_by_treatment": (CONTROL_COMPARISONS, "treatment_attempt_id"),
        # covering, in the report's order: its read is one range of the index (no row lookups, no sort)
        "for_report": (COMPARISONS, f"resolved, filter, chain_id, hop, {REPORT_ORDER}, {REPORT_COLUMNS}"),
        "controls_for_report": (CONTROL_COMPARISONS,
                                f"resolved, filter, chain_id, hop, arm, {REPORT_ORDER}, {REPORT_COLUMNS}"),
    }  # fmt: skip

    def apply(self, tx: ProjectionTx, rows: Sequence[Row]) -> None:
        started: dict[str, list[object]] = {}  # full rows of attempts (re)started in this page
        finished: dict[str, tuple[object, ...]] = {}  # outcomes of attempts started in an earlier page
        final: dict[str, tuple[bool, str | None]] = {}  # the final verdict's inline-CUDA flag and plan kind
        for position, type_, _, p, _ in rows:
            attempt = p["attempt_id"]
            if type_ == "VerifierResult":
                if p["submission"] == "final":
                    row = started.get(attempt)
                    if row is None:
                        final[attempt] = (bool(p["inline_cuda"]), p.get("plan"))
                    else:
                        row[_INLINE], row[_PLAN] = bool(p["inline_cuda"]), p.get("plan")
            elif type_ == "AttemptStarted":
                finished.pop(attempt, None)  # a retry under the same id starts over
                final.pop(attempt, None)
                started[attempt] = [p.get(f) for f in _START_FIELDS]
                started[attempt] += ("running", None, False, None, None, None, position, None, None)
            else:
                outcome = (p["status"], p["passed"], p["runtime_ms"], p["speedup"], p["skipped"], position)
                row = started.get(attempt)
                if row is None:
                    finished[attempt] = outcome
                else:
                    row[_STATUS], row[_PASSED], row[_RUNTIME], row[_SPEEDUP], row[_SKIPPED], row[_FINISHED] = outcome
        touched = [*started, *finished, *final]
        if touched:
            self._update(tx, touched, started, finished, final)

    def _update(
        self,
        tx: ProjectionTx,
        touched: list[str],
        started: dict[str, list[object]],
        finished: dict[str, tuple[object, ...]],
        final: dict[str, tuple[bool, str | None]],
    ) -> None:
        conn, attempts = tx.conn, tx.t[TRANSFER_ATTEMPTS]
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS comparisons_touched (attempt_id TEXT PRIMARY KEY)")
        conn.execute("DELETE FROM temp.comparisons_touched")
        conn.executemany("INSERT OR IGNORE INTO temp.comparisons_touched VALUES (?)", [(a,) for a in touched])
        slots = _affected_slots(conn, attempts, ("attempt_id",))  # a retry may move an attempt to another slot
        if started:
            marks = ", ".join("?" * len(ATTEMPT_FIELDS))
            conn.executemany(f"INSERT OR REPLACE INTO {attempts} VALUES ({marks})", started.values())
        if finished:
            conn.executemany(
                f"UPDATE {attempts} SET status=?, passed=?, runtime_ms=?, speedup=?, skipped=?, finished_position=?"
                " WHERE attempt_id = ?",
                [(*outcome, a) for a, outcome in finished.items()],
            )
        if final:
            conn.executemany(f"UPDATE {attempts} SET inline_cuda = ?, plan = ? WHERE attempt_id = ?",
                             [(*v, a) for a, v in final.items()])  # fmt: skip
        slots |= _affected_slots(conn, attempts, ("attempt_id", "source_attempt_id", "baseline_attempt_id"))
        self._repair(conn, attempts, tx.t[COMPARISONS], tx.t[CONTROL_COMPARISONS], sorted(slots))

    @staticmethod
    def _repair(conn: sqlite3.Connection, attempts: str, comparisons: str, controls: str, slots: list[Slot]) -> None:
        """Recompute the comparisons of ``slots`` from the stored attempts."""
        conn.execute(
            "CREATE TEMP TABLE IF NOT EXISTS comparisons_slots"
            " (campaign_id TEXT, model TEXT, problem TEXT, replicate INTEGER)"
        )
        conn.execute("DELETE FROM temp.comparisons_slots")
        conn.executemany("INSERT INTO temp.comparisons_slots VALUES (?, ?, ?, ?)", slots)
        cols = ", ".join(f"a.{f}" for f in ATTEMPT_FIELDS)
        on = " AND ".join(f"a.{c} = s.{c}" for c in _SLOT)
        grouped: dict[Slot, list[TransferAttempt]] = {}
        for row in conn.execute(f"SELECT {cols} FROM temp.comparisons_slots s CROSS JOIN {attempts} a ON {on}"):
            a = TransferAttempt(*row)
            grouped.setdefault((a.campaign_id, a.model, a.problem, a.replicate), []).append(a)
        by_id = {a.attempt_id: a for group in grouped.values() for a in group}
        named = {
            ref
            for group in grouped.values()
            for a in group
            for ref in (a.source_attempt_id, a.baseline_attempt_id)
            if ref is not None and ref not in by_id
        }
        by_id.update((a.attempt_id, a) for a in _load_by_id(conn, attempts, named))
        where = " AND ".join(f"{c} = ?" for c in _SLOT)
        marks = ", ".join("?" * len(COMPARISON_FIELDS))
        paired = [c for slot in slots for c in pair_slot(grouped.get(slot, ()), by_id)]
        for table, rows in ((comparisons, [c for c in paired if c.arm == "skill"]),
                            (controls, [c for c in paired if c.arm != "skill"])):  # fmt: skip
            conn.executemany(f"DELETE FROM {table} WHERE {where}", slots)
            conn.executemany(f"INSERT INTO {table} VALUES ({marks})", [_comparison_row(c) for c in rows])


def _affected_slots(conn: sqlite3.Connection, attempts: str, refs: Sequence[str]) -> set[Slot]:
    """Slots holding an attempt whose column ``ref`` names a touched attempt, for each of ``refs``."""
    cols = ", ".join(f"a.{c}" for c in _SLOT)
    # CROSS JOIN keeps the touched ids as the outer loop: the planner, knowing nothing of the temp
    # table's size, would otherwise scan every attempt once per part
    sql = " UNION ".join(
        f"SELECT {cols} FROM temp.comparisons_touched t CROSS JOIN {attempts} a ON a.{ref} = t.attempt_id"
        for ref in refs
    )
    return set(conn.execute(sql).fetchall())


def _load_by_id(conn: sqlite3.Connection, attempts: str, ids: Iterable[str]) -> list[TransferAttempt]:
    wanted = sorted(ids)
    cols = ", ".join(ATTEMPT_FIELDS)
    out: list[TransferAttempt] = []
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        sql = f"SELECT {cols} FROM {attempts} WHERE attempt_id IN ({', '.join('?' * len(chunk))})"
        out.extend(TransferAttempt(*row) for row in conn.execute(sql, chunk))
    return out
