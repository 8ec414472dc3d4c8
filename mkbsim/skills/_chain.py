"""A chain campaign's report: per hop, the outcome (scored pass rate), paired lift vs the target-DSL
solo, help/harm, and claim survival — the share of the origin skill's claims (hop 0) that reappear in
hop k's skill, the share of hop k-1's claims carried into hop k, and the same for hop k-1's unverified
claims (``mkbsim.claims.UNVERIFIED``). A hop that left no skill carries nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mkbsim.claims import Linker, extract_claims, is_unverified
from mkbsim.lab import HopRecord
from mkbsim.metrics import harm_rate, help_rate, paired_lift
from mkbsim.skills._tables import render, share, signed

#: chain id → hop → (the hop's attempt, the attempt whose skill it read): ``lab.chains.links``
Links = Mapping[str, Mapping[int, tuple[str, str | None]]]


def chain_report(
    links: Links, skills: Mapping[str, str], records: Sequence[HopRecord], link: Linker
) -> list[dict[str, Any]]:
    """Per hop: outcome and lift of ``records`` (``lab.transfer.hop_records``) and claim survival across the
    campaign's ``skills`` (by attempt: ``lab.skills.campaign_skills``)."""
    sentences = {a: [c.text for c in extract_claims(t)] for a, t in skills.items()}
    link.warm([s for texts in sentences.values() for s in texts])
    tally: dict[int, list[int]] = {}  # hop -> [origin kept, origin total, carried, previous total, unv kept, unv]
    for hops in links.values():
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
    by_hop: dict[int, list[HopRecord]] = {}
    for record in records:
        by_hop.setdefault(record.hop, []).append(record)
    rows = []
    for hop, cell in sorted(by_hop.items()):
        ratios = [c.r for c in cell]
        t = tally.get(hop, [0] * 6)
        rows.append({
            "hop": hop, "directions": ",".join(sorted({c.direction for c in cell})), "n": len(cell),
            "pass_rate": sum(1 for c in cell if c.treatment_passed) / len(cell),
            "skipped": sum(1 for c in cell if c.skipped),
            "paired_lift": paired_lift(ratios), "help_rate": help_rate(ratios), "harm_rate": harm_rate(ratios),
            "origin_survival": t[0] / t[1] if t[1] else None, "carried": t[2] / t[3] if t[3] else None,
            "unverified_carried": t[4] / t[5] if t[5] else None,
        })  # fmt: skip
    return rows


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
