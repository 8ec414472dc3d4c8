"""The comparisons browser's reads, over the `comparisons` projection (one row per comparison, DESIGN §6).

A filtered, sorted view is an ordered list of rowids (one query per change of filter or sort); the
table then fetches only the rows it draws, a page at a time, by rowid. Aggregates reuse
``mkbsim.metrics`` (paired lift, help and harm rates, the report's grouped cells).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from mkbsim.metrics import COMPARISON_FIELDS, Comparison, harm_rate, help_rate, paired_lift
from mkbsim.metrics._sections import ComparisonRecord, groups
from tui.data.connection import has_tables

#: Sortable columns: table column key → SQL expression.
SORT_COLUMNS: dict[str, str] = {
    "model": "model",
    "direction": "direction",
    "family": "family",
    "problem": "problem",
    "replicate": "replicate",
    "baseline": "baseline_speedup",
    "treatment": "treatment_speedup",
    "r": "r",
    "outcome": "outcome",
    "verdict": "verdict_change",
    "standing": "standing",
    "variant": "COALESCE(filter, chain_id)",
}
_SEARCHED = ("model", "problem", "family", "direction", "campaign_id")
_COLUMNS = ", ".join(COMPARISON_FIELDS)
_STANDINGS = ("above", "same", "below")


@dataclass(frozen=True)
class ComparisonQuery:
    """A filter and an order over the comparisons table."""

    campaign_id: str | None = None
    search: str = ""
    harmed_only: bool = False
    verdict_flips: bool = False
    standing: str | None = None
    sort: str = "r"
    descending: bool = False

    def where(self) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if self.campaign_id is not None:
            clauses.append("campaign_id = ?")
            params.append(self.campaign_id)
        if self.harmed_only:
            clauses.append("outcome = 'harmed'")
        if self.verdict_flips:
            clauses.append("verdict_change IN ('rescue', 'break')")
        if self.standing is not None:
            if self.standing not in _STANDINGS:
                raise ValueError(f"unknown standing {self.standing!r}")
            clauses.append("standing = ?")
            params.append(self.standing)
        for word in self.search.split():
            pattern = f"%{word.replace('%', '').replace('_', '')}%"
            clauses.append("(" + " OR ".join(f"{c} LIKE ?" for c in _SEARCHED) + ")")
            params.extend([pattern] * len(_SEARCHED))
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", params

    def order_by(self) -> str:
        expression = SORT_COLUMNS[self.sort]
        direction = "DESC" if self.descending else "ASC"
        # unresolved comparisons (NULL r, outcome, ...) go last either way; ties keep the projection's order
        return f" ORDER BY ({expression}) IS NULL, {expression} {direction}, rowid"

    def sorted_by(self, column: str) -> ComparisonQuery:
        """This query sorted by ``column``; choosing the current column again reverses the order."""
        if column not in SORT_COLUMNS:
            raise ValueError(f"not a sortable column: {column!r}")
        if column == self.sort:
            return replace(self, descending=not self.descending)
        return replace(self, sort=column, descending=False)


@dataclass(frozen=True)
class ComparisonRow:
    rowid: int
    comparison: Comparison


@dataclass(frozen=True)
class Summary:
    total: int
    resolved: int
    paired_lift: float | None
    help_rate: float | None
    harm_rate: float | None


@dataclass(frozen=True)
class LiftBar:
    label: str
    direction: str
    paired_lift: float
    n: int


@dataclass(frozen=True)
class Aggregates:
    summary: Summary
    by_family: list[LiftBar]
    by_tier: list[LiftBar]


def available(conn: sqlite3.Connection) -> bool:
    return has_tables(conn, "comparisons")


def campaign_ids(conn: sqlite3.Connection) -> list[str]:
    if not available(conn):
        return []
    return [r[0] for r in conn.execute("SELECT DISTINCT campaign_id FROM comparisons ORDER BY campaign_id")]


def ordered_rowids(conn: sqlite3.Connection, query: ComparisonQuery) -> list[int]:
    if not available(conn):
        return []
    where, params = query.where()
    return [r[0] for r in conn.execute(f"SELECT rowid FROM comparisons{where}{query.order_by()}", params)]


def fetch(conn: sqlite3.Connection, rowids: Sequence[int]) -> list[ComparisonRow]:
    """The rows of ``rowids``, in that order (ids no longer present are left out)."""
    if not rowids:
        return []
    marks = ",".join("?" * len(rowids))
    found = {
        row[0]: ComparisonRow(row[0], Comparison(*row[1:]))
        for row in conn.execute(f"SELECT rowid, {_COLUMNS} FROM comparisons WHERE rowid IN ({marks})", list(rowids))
    }
    return [found[i] for i in rowids if i in found]


def get(conn: sqlite3.Connection, treatment_attempt_id: str) -> Comparison | None:
    if not available(conn):
        return None
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM comparisons WHERE treatment_attempt_id = ?", (treatment_attempt_id,)
    ).fetchone()
    return Comparison(*row) if row else None


def reverse_of(conn: sqlite3.Connection, c: Comparison) -> Comparison | None:
    """The other direction's comparison of the same campaign, model, problem, replicate and variant."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM comparisons WHERE campaign_id = ? AND model = ? AND problem = ? AND replicate = ?"
        " AND direction != ? AND filter IS ? AND chain_id IS ? AND hop IS ?",
        (c.campaign_id, c.model, c.problem, c.replicate, c.direction, c.filter, c.chain_id, c.hop),
    ).fetchone()
    return Comparison(*row) if row else None


def aggregate(conn: sqlite3.Connection, query: ComparisonQuery) -> Aggregates:
    """The summary of the comparisons matching ``query`` and the paired lift of their resolved ones per
    family and per source tier (DESIGN §6; 0 = failed), each by direction: one scan."""
    if not available(conn):
        return Aggregates(Summary(0, 0, None, None, None), [], [])
    where, params = query.where()
    total = conn.execute(f"SELECT COUNT(*) FROM comparisons{where}", params).fetchone()[0]
    resolved_where = f"{where} AND resolved = 1" if where else " WHERE resolved = 1"
    ratios: list[float] = []
    by_family: dict[tuple[str, str], list[float]] = {}
    by_tier: dict[tuple[str, str], list[float]] = {}
    for family, tier, direction, r in conn.execute(
        f"SELECT family, source_tier, direction, r FROM comparisons{resolved_where}", params
    ):
        ratios.append(r)
        by_family.setdefault((family, direction), []).append(r)
        by_tier.setdefault(("–" if tier is None else str(tier), direction), []).append(r)
    if not ratios:
        return Aggregates(Summary(total, 0, None, None, None), [], [])
    summary = Summary(total, len(ratios), paired_lift(ratios), help_rate(ratios), harm_rate(ratios))
    return Aggregates(summary, _bars(by_family), _bars(by_tier))


def _bars(cells: dict[tuple[str, str], list[float]]) -> list[LiftBar]:
    return [LiftBar(label, direction, paired_lift(rs), len(rs)) for (label, direction), rs in sorted(cells.items())]


def comparison_records(conn: sqlite3.Connection, campaign_id: str | None) -> tuple[list[ComparisonRecord], int]:
    """Resolved comparisons as the report's records, and the number still pending.

    One campaign: all its comparisons except chain hops (a filter test is its own campaign, so its
    filtered comparisons are its lift). All campaigns: the plain protocol only, as ``mkbsim report``.
    """
    if not available(conn):
        return [], 0
    if campaign_id is None:
        scope, params = "filter IS NULL AND chain_id IS NULL AND hop IS NULL", []
    else:
        scope, params = "campaign_id = ? AND chain_id IS NULL AND hop IS NULL", [campaign_id]
    records = [
        ComparisonRecord(c, m, p, f, d, rep, r, out, change, bool(skipped), standing)
        for c, m, p, f, d, rep, r, out, change, skipped, standing in conn.execute(
            "SELECT campaign_id, model, problem, family, direction, replicate, r, outcome, verdict_change, skipped,"
            f" standing FROM comparisons WHERE resolved = 1 AND {scope}"
            " ORDER BY campaign_id, model, problem, direction, replicate",
            params,
        )
    ]
    pending = conn.execute(f"SELECT COUNT(*) FROM comparisons WHERE resolved = 0 AND {scope}", params).fetchone()[0]
    return records, int(pending)


def lift_rows(records: Sequence[ComparisonRecord]) -> list[dict[str, Any]]:
    """The report's cells per model × direction, then each direction pooled over models (model "all")."""
    if not records:
        return []
    per_model = groups(records, ("model", "direction"))
    pooled = groups(records, ("direction",))
    return [*per_model, *pooled]


def search(conn: sqlite3.Connection, words: Iterable[str], limit: int) -> list[Comparison]:
    """Comparisons whose model, problem, family, direction or campaign contain every word (harmed first)."""
    query = ComparisonQuery(search=" ".join(words))
    if not available(conn):
        return []
    where, params = query.where()
    rows = conn.execute(f"SELECT {_COLUMNS} FROM comparisons{where}{query.order_by()} LIMIT ?", [*params, limit])
    return [Comparison(*row) for row in rows]
