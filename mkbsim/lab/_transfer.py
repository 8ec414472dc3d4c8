"""Transfer queries over the `comparisons` projection (DESIGN §6): the report's records, the records the
monitor's lift cells and the filter-test and chain reports use, and the tables ``--export`` writes."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, NamedTuple

from mkbsim.errors import UserError
from mkbsim.lab._reader import Queries
from mkbsim.metrics import choose, scored_pass
from mkbsim.metrics._pairing import resolved
from mkbsim.metrics._sections import ComparisonRecord, SoloRecord
from mkbsim.projections._comparisons import REPORT_ORDER
from mkbsim.projections._tables import PROJECTION_TABLES

#: The plain protocol: no skill filter, no chain (filter tests and chains report on their own).
PLAIN = "filter IS NULL AND chain_id IS NULL AND hop IS NULL"
_NOT_CHAINED = "chain_id IS NULL AND hop IS NULL"
_RECORD_COLUMNS = (
    "campaign_id, model, problem, family, direction, replicate, r, outcome, verdict_change, skipped, standing"
)

#: (model, problem, direction, replicate): one comparison of a campaign's protocol
Key = tuple[str, str, str, int]


class SoloOutcome(NamedTuple):
    """What the report reads of a plain solo attempt: its role (the first five fields), what ``choose``
    looks at and its outcome (each column read costs the report: it reads one row per solo attempt)."""

    campaign_id: str
    model: str
    problem: str
    replicate: int
    arm: str
    family: str
    dsl: str
    status: str
    passed: bool | None
    inline_cuda: bool
    runtime_ms: float | None
    speedup: float | None
    skipped: bool | None
    started_position: int
    finished_position: int | None
    plan: str | None

    @property
    def resolved(self) -> bool:
        return resolved(self.status, self.passed, self.skipped, self.runtime_ms)


_SOLO_COLUMNS = ", ".join(SoloOutcome._fields)


@dataclass(frozen=True)
class ReportData:
    """What ``mkbsim report`` computes its sections from."""

    campaigns: list[str]
    comparisons: list[ComparisonRecord]
    pending: int
    solos: list[SoloRecord]
    controls: dict[str, list[ComparisonRecord]]  # control arm → its resolved comparisons


@dataclass(frozen=True, slots=True)
class VerdictRecord:
    """One resolved plain comparison's verdicts and runtimes: what r is computed from (DESIGN §6), for
    rescoring it under other metric settings."""

    model: str
    problem: str
    family: str
    direction: str
    baseline_passed: bool
    baseline_runtime_ms: float | None
    treatment_passed: bool
    treatment_runtime_ms: float | None
    skipped: bool
    verdict_change: str


@dataclass(frozen=True, slots=True)
class HopRecord:
    """One resolved comparison of a chain hop: its chain, hop, the comparison as the report's record,
    and the hop's scored verdict."""

    chain_id: str
    hop: int
    comparison: ComparisonRecord
    treatment_passed: bool


@dataclass(frozen=True, slots=True)
class SkillComparison:
    """One resolved plain comparison, as the skills report groups it."""

    treatment_attempt_id: str
    source_attempt_id: str | None  # whose skill was read (its labels are the read skill's)
    model: str
    problem: str
    direction: str
    family: str
    r: float
    outcome: str
    treatment_passed: bool
    verdict_change: str


class TransferQueries(Queries):
    def campaigns(self) -> list[str]:
        """Every campaign with attempts, sorted."""
        return self._column(f"SELECT DISTINCT campaign_id FROM {self.t.transfer_attempts} ORDER BY campaign_id")

    def report_data(self, campaign: str | None = None) -> ReportData:
        """Plain-protocol resolved comparisons and solo attempts, of one campaign or of all."""
        known = self.campaigns()
        if campaign is not None and campaign not in known:
            raise UserError(f"unknown campaign {campaign!r} (known: {', '.join(known) or 'none'})")
        where, params = (f"{PLAIN} AND campaign_id = ?", [campaign]) if campaign is not None else (PLAIN, [])
        comparisons, pending = self._records(where, params)
        roles: dict[tuple[Any, ...], list[SoloOutcome]] = {}
        for a in itertools.starmap(SoloOutcome, self._all(
            f"SELECT {_SOLO_COLUMNS} FROM {self.t.transfer_attempts}"
            f" WHERE arm IN ('solo_cutedsl', 'solo_tirx') AND {where}",
            params,
        )):  # fmt: skip
            roles.setdefault(a[:5], []).append(a)
        solos = []
        # in the order the roles were first read: the intervals' float sums depend on it in their last bits
        for candidates in roles.values():
            # the attempt that counts, as pairing picks it (a role read once: that attempt)
            chosen = candidates[0] if len(candidates) == 1 else choose(candidates)
            if chosen is not None and chosen.resolved:
                passed, inline = bool(chosen.passed), bool(chosen.inline_cuda)
                solos.append(SoloRecord(chosen.campaign_id, chosen.model, chosen.problem, chosen.family, chosen.dsl,
                                        scored_pass(passed, inline), passed and inline, chosen.speedup,
                                        scored_pass(passed, inline) and chosen.plan == "partial"))  # fmt: skip
        controls = self.control_records(campaign)
        return ReportData(known if campaign is None else [campaign], comparisons, pending, solos, controls)

    def verdict_records(self, campaign: str | None = None) -> list[VerdictRecord]:
        """Resolved plain comparisons with the verdicts and runtimes r is computed from."""
        where, params = (f"{PLAIN} AND campaign_id = ?", [campaign]) if campaign is not None else (PLAIN, [])
        rows = self._all(
            "SELECT model, problem, family, direction, baseline_passed, baseline_runtime_ms, treatment_passed,"
            f" treatment_runtime_ms, skipped, verdict_change FROM {self.t.comparisons} WHERE resolved = 1 AND {where}"
            " ORDER BY campaign_id, model, problem, direction, replicate",
            params,
        )
        return [VerdictRecord(m, p, f, d, bool(bp), br, bool(tp), tr, bool(sk), v)
                for m, p, f, d, bp, br, tp, tr, sk, v in rows]  # fmt: skip

    def control_records(self, campaign: str | None = None) -> dict[str, list[ComparisonRecord]]:
        """Resolved plain-protocol control comparisons (DESIGN §4) by arm (aa, placebo, matched)."""
        where, params = (f"{PLAIN} AND campaign_id = ?", [campaign]) if campaign is not None else (PLAIN, [])
        out: dict[str, list[ComparisonRecord]] = {}
        for arm, *row in self._all(
            f"SELECT arm, {_RECORD_COLUMNS} FROM {self.t.control_comparisons} WHERE resolved = 1 AND {where}"
            f" ORDER BY arm, {REPORT_ORDER}",
            params,
        ):
            c, m, p, f, d, rep, r, result, change, skipped, standing = row
            record = ComparisonRecord(c, m, p, f, d, rep, r, result, change, bool(skipped), standing)
            out.setdefault(arm, []).append(record)
        return out

    def lift_records(self, campaign: str | None) -> tuple[list[ComparisonRecord], int]:
        """Resolved comparisons as the report's records, and the number still pending. One campaign: all its
        comparisons (a filter test's are its filtered ones; a chain campaign's are its hops, pooled). All
        campaigns: the plain protocol only, as ``mkbsim report``."""
        if campaign is None:
            return self._records(PLAIN, [])
        return self._records("campaign_id = ?", [campaign])

    def models(self, campaign: str) -> set[str]:
        return set(self._column(f"SELECT DISTINCT model FROM {self.t.comparisons} WHERE campaign_id = ?", [campaign]))

    def ratios(self, campaign: str, filter_name: str | None) -> dict[Key, float]:
        """r of each resolved unchained comparison of ``campaign`` read through ``filter_name`` (None: none)."""
        rows = self._all(
            f"SELECT model, problem, direction, replicate, r FROM {self.t.comparisons} WHERE campaign_id = ?"
            f" AND resolved = 1 AND filter IS ? AND {_NOT_CHAINED}",
            [campaign, filter_name],
        )
        return {(m, p, d, rep): r for m, p, d, rep, r in rows}

    def hop_records(self, campaign: str) -> list[HopRecord]:
        """The resolved comparisons of a chain campaign's hops, by hop."""
        rows = self._all(
            f"SELECT chain_id, hop, treatment_passed, {_RECORD_COLUMNS} FROM {self.t.comparisons}"
            " WHERE campaign_id = ? AND chain_id IS NOT NULL AND resolved = 1"
            " ORDER BY hop, model, problem, direction, replicate, chain_id",
            [campaign],
        )
        return [
            HopRecord(chain, hop, ComparisonRecord(c, m, p, f, d, rep, r, out, change, bool(skipped), standing),
                      bool(passed))
            for chain, hop, passed, c, m, p, f, d, rep, r, out, change, skipped, standing in rows
        ]  # fmt: skip

    def skill_comparisons(self, campaign: str | None) -> list[SkillComparison]:
        """Resolved plain comparisons (of one campaign or all), by treatment attempt id."""
        where, params = (f"{PLAIN} AND campaign_id = ?", [campaign]) if campaign else (PLAIN, [])
        rows = self._all(
            "SELECT treatment_attempt_id, source_attempt_id, model, problem, direction, family, r, outcome,"
            f" treatment_passed, verdict_change FROM {self.t.comparisons} WHERE resolved = 1 AND {where}"
            " ORDER BY treatment_attempt_id",
            params,
        )
        return [SkillComparison(a, s, m, p, d, f, r, o, bool(passed), v) for a, s, m, p, d, f, r, o, passed, v in rows]

    def harmed_failures(self, campaign: str | None) -> list[str]:
        """Treatments of harmed comparisons (not skipped): each has a target-side failure (DESIGN §7), a
        break (the treatment failed) or a runtime-only harm (it passed but fell short of its solo)."""
        where, params = ("campaign_id = ? AND ", [campaign]) if campaign else ("", [])
        return self._column(
            f"SELECT treatment_attempt_id FROM {self.t.comparisons} WHERE {where}outcome = 'harmed'"
            " AND skipped = 0 ORDER BY treatment_attempt_id",
            params,
        )

    def projection_tables(self) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
        """Every projection table's columns and rows (``mkbsim report --export``), by table name."""
        out = {}
        for name in PROJECTION_TABLES:
            columns = [r[1] for r in self._all(f"PRAGMA {self.t.schema}.table_info({name})")]
            out[name] = (columns, self._all(f"SELECT * FROM {self.t.physical(name)}"))
        return out

    def _records(self, where: str, params: list[Any]) -> tuple[list[ComparisonRecord], int]:
        records = [
            ComparisonRecord(c, m, p, f, d, rep, r, out, change, bool(skipped), standing)
            for c, m, p, f, d, rep, r, out, change, skipped, standing in self._all(
                f"SELECT {_RECORD_COLUMNS} FROM {self.t.comparisons} WHERE resolved = 1 AND {where}"
                f" ORDER BY {REPORT_ORDER}",
                params,
            )
        ]
        row = self._one(f"SELECT COUNT(*) FROM {self.t.comparisons} WHERE resolved = 0 AND {where}", params)
        return records, int(row[0]) if row else 0
