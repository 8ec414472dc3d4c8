"""The comparisons browser's queries over the `comparisons` projection (one row per comparison, DESIGN §6).

A filtered, sorted view is an ordered list of rowids (one query per change of filter or sort); a table
then fetches only the rows it draws, a page at a time, by rowid. Aggregates reuse ``mkbsim.metrics``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from mkbsim.lab._reader import Queries
from mkbsim.metrics import COMPARISON_FIELDS, STANDINGS, Comparison, harm_rate, help_rate, paired_lift

#: Sortable columns: a view's column key → SQL expression.
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


@dataclass(frozen=True)
class ComparisonQuery:
    """A filter and an order over the comparisons."""

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
            if self.standing not in STANDINGS:
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


class ComparisonQueries(Queries):
    def campaign_ids(self) -> list[str]:
        return self._column(f"SELECT DISTINCT campaign_id FROM {self.t.comparisons} ORDER BY campaign_id")

    def ordered_rowids(self, query: ComparisonQuery) -> list[int]:
        where, params = query.where()
        return self._column(f"SELECT rowid FROM {self.t.comparisons}{where}{query.order_by()}", params)

    def fetch(self, rowids: Sequence[int]) -> list[ComparisonRow]:
        """The rows of ``rowids``, in that order (ids no longer present are left out)."""
        sql = f"SELECT rowid, {_COLUMNS} FROM {self.t.comparisons} WHERE rowid IN ({{marks}})"
        found = {row[0]: ComparisonRow(row[0], Comparison(*row[1:])) for row in self._in_chunks(sql, rowids)}
        return [found[i] for i in rowids if i in found]

    def get(self, treatment_attempt_id: str) -> Comparison | None:
        row = self._one(
            f"SELECT {_COLUMNS} FROM {self.t.comparisons} WHERE treatment_attempt_id = ?", [treatment_attempt_id]
        )
        return Comparison(*row) if row else None

    def reverse_of(self, c: Comparison) -> Comparison | None:
        """The other direction's comparison of the same campaign, model, problem, replicate and variant."""
        row = self._one(
            f"SELECT {_COLUMNS} FROM {self.t.comparisons} WHERE campaign_id = ? AND model = ? AND problem = ?"
            " AND replicate = ? AND direction != ? AND filter IS ? AND chain_id IS ? AND hop IS ?",
            [c.campaign_id, c.model, c.problem, c.replicate, c.direction, c.filter, c.chain_id, c.hop],
        )
        return Comparison(*row) if row else None

    def first(self, query: ComparisonQuery) -> Comparison | None:
        where, params = query.where()
        row = self._one(f"SELECT {_COLUMNS} FROM {self.t.comparisons}{where}{query.order_by()} LIMIT 1", params)
        return Comparison(*row) if row else None

    def aggregate(self, query: ComparisonQuery) -> Aggregates:
        """The summary of the comparisons matching ``query`` and the paired lift of their resolved ones per
        family and per source tier (DESIGN §6; 0 = failed), each by direction: one scan."""
        where, params = query.where()
        row = self._one(f"SELECT COUNT(*) FROM {self.t.comparisons}{where}", params)
        total = int(row[0]) if row else 0
        resolved_where = f"{where} AND resolved = 1" if where else " WHERE resolved = 1"
        ratios: list[float] = []
        by_family: dict[tuple[str, str], list[float]] = {}
        by_tier: dict[tuple[str, str], list[float]] = {}
        for family, tier, direction, r in self._all(
            f"SELECT family, source_tier, direction, r FROM {self.t.comparisons}{resolved_where}", params
        ):
            ratios.append(r)
            by_family.setdefault((family, direction), []).append(r)
            by_tier.setdefault(("–" if tier is None else str(tier), direction), []).append(r)
        if not ratios:
            return Aggregates(Summary(total, 0, None, None, None), [], [])
        summary = Summary(total, len(ratios), paired_lift(ratios), help_rate(ratios), harm_rate(ratios))
        return Aggregates(summary, _bars(by_family), _bars(by_tier))

    def search(self, words: Iterable[str], limit: int) -> list[Comparison]:
        """Comparisons whose model, problem, family, direction or campaign contain every word (by r)."""
        query = ComparisonQuery(search=" ".join(words))
        where, params = query.where()
        rows = self._all(f"SELECT {_COLUMNS} FROM {self.t.comparisons}{where}{query.order_by()} LIMIT ?",
                         [*params, limit])  # fmt: skip
        return [Comparison(*row) for row in rows]


def _bars(cells: dict[tuple[str, str], list[float]]) -> list[LiftBar]:
    return [LiftBar(label, direction, paired_lift(rs), len(rs)) for (label, direction), rs in sorted(cells.items())]
