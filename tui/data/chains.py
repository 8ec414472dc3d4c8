"""Chain reads: multi-hop chains (attempts with a ``chain_id`` and ``hop``), each hop's outcome and
comparison, and the lineage of each claim across the hops' skills.

Claims are linked hop to hop by word overlap of their sentences (the claim extractor's segmentation);
a claim a hop repeats in other words than the previous hop's is counted as new.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass, field

from mkbsim.claims import Claim, extract_claims
from tui.data.connection import has_tables

#: Jaccard overlap of two sentences' word sets above which the later one continues the earlier claim.
SAME_CLAIM_OVERLAP = 0.6


@dataclass(frozen=True)
class ChainSummary:
    chain_id: str
    campaign_id: str
    model: str
    problem: str
    #: (hop, status, passed) per hop attempt, in hop order
    hops: tuple[tuple[int, str, bool | None], ...]


@dataclass(frozen=True)
class Hop:
    hop: int
    attempt_id: str
    dsl: str
    status: str
    passed: bool | None
    speedup: float | None
    r: float | None
    outcome: str | None
    skill: str | None


@dataclass
class Lineage:
    """One claim followed across hops: the sentence at each hop where it appears (None: absent)."""

    category: str
    first_hop: int
    sentences: dict[int, Claim] = field(default_factory=dict)


@dataclass(frozen=True)
class ChainDetail:
    summary: ChainSummary
    hops: list[Hop]
    lineages: list[Lineage]


def chains(conn: sqlite3.Connection) -> list[ChainSummary]:
    if not has_tables(conn, "attempts"):
        return []
    grouped: dict[str, list[tuple[str, str, str, int, str, int | None]]] = {}
    for chain_id, campaign, model, problem, hop, status, passed in conn.execute(
        "SELECT chain_id, campaign_id, model, problem, hop, status, passed FROM attempts"
        " WHERE chain_id IS NOT NULL ORDER BY chain_id, hop, started_position"
    ):
        grouped.setdefault(chain_id, []).append((campaign, model, problem, hop or 0, status, passed))
    out = []
    for chain_id, rows in grouped.items():
        campaign, model, problem = rows[0][:3]
        latest = {hop: (status, None if passed is None else bool(passed)) for *_, hop, status, passed in rows}
        hops = tuple((hop, status, passed) for hop, (status, passed) in sorted(latest.items()))
        out.append(ChainSummary(chain_id, campaign, model, problem, hops))
    return out


def chain_detail(conn: sqlite3.Connection, summary: ChainSummary) -> ChainDetail:
    attempts: dict[int, tuple[str, str, str, bool | None, float | None]] = {}
    for attempt_id, hop, dsl, status, passed, speedup in conn.execute(
        "SELECT attempt_id, hop, dsl, status, passed, speedup FROM attempts WHERE chain_id = ?"
        " ORDER BY hop, started_position",
        (summary.chain_id,),
    ):
        attempts[hop or 0] = (attempt_id, dsl, status, None if passed is None else bool(passed), speedup)
    outcomes: dict[str, tuple[float | None, str | None]] = {}
    if has_tables(conn, "comparisons"):
        for treatment, r, outcome in conn.execute(
            "SELECT treatment_attempt_id, r, outcome FROM comparisons WHERE chain_id = ?", (summary.chain_id,)
        ):
            outcomes[treatment] = (r, outcome)
    hops = []
    for hop, (attempt_id, dsl, status, passed, speedup) in sorted(attempts.items()):
        r, outcome = outcomes.get(attempt_id, (None, None))
        hops.append(Hop(hop, attempt_id, dsl, status, passed, speedup, r, outcome, _written_skill(conn, attempt_id)))
    return ChainDetail(summary, hops, lineages(hops))


def lineages(hops: list[Hop]) -> list[Lineage]:
    """Claims of each hop's written skill, each linked to the most similar claim of the previous hop."""
    out: list[Lineage] = []
    previous: list[tuple[Lineage, frozenset[str]]] = []
    for hop in hops:
        current: list[tuple[Lineage, frozenset[str]]] = []
        taken: set[int] = set()
        for claim in extract_claims(hop.skill or ""):
            words = _words(claim.text)
            best, best_overlap = None, SAME_CLAIM_OVERLAP
            for k, (_, earlier) in enumerate(previous):
                overlap = _jaccard(words, earlier)
                if k not in taken and overlap >= best_overlap:
                    best, best_overlap = k, overlap
            if best is None:
                lineage = Lineage(claim.category, hop.hop)
                out.append(lineage)
            else:
                taken.add(best)
                lineage = previous[best][0]
            lineage.sentences[hop.hop] = claim
            current.append((lineage, words))
        previous = current
    return out


def _written_skill(conn: sqlite3.Connection, attempt_id: str) -> str | None:
    row = conn.execute(
        "SELECT payload FROM events WHERE stream_id = ? AND type = 'SkillWritten' ORDER BY version DESC LIMIT 1",
        (f"attempt-{attempt_id}",),
    ).fetchone()
    return str(json.loads(row[0]).get("text", "")) if row else None


_WORD = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")


def _words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower()))


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0
