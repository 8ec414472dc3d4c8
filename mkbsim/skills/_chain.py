"""A chain campaign's report: per hop, the outcome (scored pass rate), paired lift vs the target-DSL
solo, help/harm, and claim survival — the share of the origin skill's claims (hop 0) that reappear in
hop k's skill, the share of hop k-1's claims carried into hop k, and the same for hop k-1's unverified
claims (``mkbsim.claims.UNVERIFIED``). A hop that left no skill carries nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from mkbsim.claims import Linker, extract_claims, is_unverified
from mkbsim.events import EventStore
from mkbsim.metrics import harm_rate, help_rate, paired_lift
from mkbsim.skills._tables import render, share, signed


def campaign_skills(store: EventStore, campaign_id: str) -> dict[str, str]:
    """Skill text by attempt id, for the attempts of one campaign."""
    ids = {r[0] for r in store.connection.execute(
        "SELECT attempt_id FROM transfer_attempts WHERE campaign_id = ?", (campaign_id,))}  # fmt: skip
    return {ev.payload["attempt_id"]: ev.payload["text"] for ev in store.read(types=["SkillWritten"])
            if ev.payload["attempt_id"] in ids}  # fmt: skip


def chain_report(store: EventStore, campaign_id: str, link: Linker) -> list[dict[str, Any]]:
    conn = store.connection
    skills = campaign_skills(store, campaign_id)
    sentences = {a: [c.text for c in extract_claims(t)] for a, t in skills.items()}
    link.warm([s for texts in sentences.values() for s in texts])
    chains: dict[str, dict[int, tuple[str, str | None]]] = {}
    for chain_id, hop, attempt, source in conn.execute(
        "SELECT chain_id, hop, attempt_id, source_attempt_id FROM transfer_attempts"
        " WHERE campaign_id = ? AND chain_id IS NOT NULL",
        (campaign_id,),
    ):
        chains.setdefault(chain_id, {})[hop] = (attempt, source)
    tally: dict[int, list[int]] = {}  # hop -> [origin kept, origin total, carried, previous total, unv kept, unv]
    for hops in chains.values():
        origin = sentences.get(hops[1][1] or "", []) if 1 in hops else []
        for hop in sorted(hops):
            attempt, source = hops[hop]
            mine, previous = sentences.get(attempt, []), sentences.get(source or "", [])
            carried = {x.source for x in link.link(previous, mine)}
            unverified = [i for i, s in enumerate(previous) if is_unverified(s)]
            t = tally.setdefault(hop, [0] * 6)
            t[0] += len(link.link(origin, mine))
            t[1] += len(origin)
            t[2] += len(carried)
            t[3] += len(previous)
            t[4] += sum(1 for i in unverified if i in carried)
            t[5] += len(unverified)
    rows = []
    for hop, direction_set, records in _comparisons(conn, campaign_id):
        ratios = [r for r, _, _ in records]
        t = tally.get(hop, [0] * 6)
        rows.append({
            "hop": hop, "directions": direction_set, "n": len(records),
            "pass_rate": sum(1 for _, passed, _ in records if passed) / len(records),
            "skipped": sum(1 for _, _, skipped in records if skipped),
            "paired_lift": paired_lift(ratios), "help_rate": help_rate(ratios), "harm_rate": harm_rate(ratios),
            "origin_survival": t[0] / t[1] if t[1] else None, "carried": t[2] / t[3] if t[3] else None,
            "unverified_carried": t[4] / t[5] if t[5] else None,
        })  # fmt: skip
    return rows


def _comparisons(conn: sqlite3.Connection, campaign_id: str) -> list[tuple[int, str, list[tuple[float, bool, bool]]]]:
    by_hop: dict[int, tuple[set[str], list[tuple[float, bool, bool]]]] = {}
    for hop, direction, r, passed, skipped in conn.execute(
        "SELECT hop, direction, r, treatment_passed, skipped FROM comparisons"
        " WHERE campaign_id = ? AND chain_id IS NOT NULL AND resolved = 1",
        (campaign_id,),
    ):
        directions, records = by_hop.setdefault(hop, (set(), []))
        directions.add(direction)
        records.append((r, bool(passed), bool(skipped)))
    return [(h, ",".join(sorted(d)), recs) for h, (d, recs) in sorted(by_hop.items())]


def render_chain(rows: Sequence[dict[str, Any]], campaign_id: str, link: Linker) -> str:
    headers = ("hop", "n", "pass", "skip", "lift vs solo", "help", "harm", "origin kept", "carried", "unverif. carried")
    body = [
        (str(r["hop"]), str(r["n"]), share(r["pass_rate"]), str(r["skipped"]), signed(r["paired_lift"]),
         share(r["help_rate"]), share(r["harm_rate"]), share(r["origin_survival"]), share(r["carried"]),
         share(r["unverified_carried"]))
        for r in rows
    ]  # fmt: skip
    title = (f"chain campaign {campaign_id}: hops alternate DSLs (both starting DSLs pooled);\n"
             f"claims linked by {link.note}, threshold {link.threshold}")  # fmt: skip
    return render(title, headers, body)
