"""Reading the report's records from the comparisons projection's tables (brought current by the caller)."""

from __future__ import annotations

import dataclasses
import sqlite3
from dataclasses import dataclass

from mkbsim.errors import UserError
from mkbsim.metrics._pairing import TransferAttempt, choose
from mkbsim.metrics._sections import ComparisonRecord, SoloRecord

#: The plain protocol: no skill filter, no chain (filter tests and chains report on their own).
_PLAIN = "filter IS NULL AND chain_id IS NULL AND hop IS NULL"
_ATTEMPT_COLUMNS = ", ".join(f.name for f in dataclasses.fields(TransferAttempt))


@dataclass(frozen=True)
class ReportData:
    campaigns: list[str]
    comparisons: list[ComparisonRecord]
    pending: int
    solos: list[SoloRecord]


def load(conn: sqlite3.Connection, campaign: str | None = None) -> ReportData:
    """Plain-protocol resolved comparisons and solo attempts, of one campaign or of all."""
    known = [r[0] for r in conn.execute("SELECT DISTINCT campaign_id FROM transfer_attempts ORDER BY campaign_id")]
    if campaign is not None and campaign not in known:
        raise UserError(f"unknown campaign {campaign!r} (known: {', '.join(known) or 'none'})")
    where, params = (f"{_PLAIN} AND campaign_id = ?", [campaign]) if campaign is not None else (_PLAIN, [])
    comparisons = [
        ComparisonRecord(c, m, p, f, d, rep, r, out, change, bool(skipped), standing)
        for c, m, p, f, d, rep, r, out, change, skipped, standing in conn.execute(
            "SELECT campaign_id, model, problem, family, direction, replicate, r, outcome, verdict_change, skipped,"
            f" standing FROM comparisons WHERE resolved = 1 AND {where}"
            " ORDER BY campaign_id, model, problem, direction, replicate",
            params,
        )
    ]
    pending = conn.execute(f"SELECT COUNT(*) FROM comparisons WHERE resolved = 0 AND {where}", params).fetchone()[0]
    roles: dict[tuple[str, str, str, int, str], list[TransferAttempt]] = {}
    for row in conn.execute(
        f"SELECT {_ATTEMPT_COLUMNS} FROM transfer_attempts WHERE arm IN ('solo_cutedsl', 'solo_tirx') AND {where}",
        params,
    ):
        a = TransferAttempt(*row)
        roles.setdefault((a.campaign_id, a.model, a.problem, a.replicate, a.arm), []).append(a)
    solos = []
    for candidates in roles.values():  # in any order: solo statistics are counts and exact (fsum) means
        chosen = choose(candidates)  # the attempt that counts, as pairing picks it
        if chosen is not None and chosen.resolved:
            solos.append(
                SoloRecord(chosen.campaign_id, chosen.model, chosen.problem, chosen.family, chosen.dsl,
                           chosen.scored_pass, bool(chosen.passed) and bool(chosen.inline_cuda), chosen.speedup)
            )  # fmt: skip
    return ReportData(known if campaign is None else [campaign], comparisons, int(pending), solos)
