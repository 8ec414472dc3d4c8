"""A chain campaign's report, per model × hop (DESIGN §4, §6): the outcome (scored pass rate), paired lift
vs the target-DSL solo, help/harm, and claim survival — the share of the origin skill's claims (hop 0)
that reappear in hop k's skill, the share of hop k-1's claims carried into hop k, and the same for hop
k-1's unverified claims (``mkbsim.claims.UNVERIFIED``). A hop that left no skill carries nothing.

Each cell's lift, help and harm, their intervals and the test are the report's (``cell_stats``: problems
as clusters, the t interval on log r under 20 problems, the sign-flip p), Holm/BH adjusted across the
table; the pass rate and the survival shares have cluster-bootstrap intervals over problems (a chain's
claims stay with its problem). "all" pools the models."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mkbsim.claims import Linker, extract_claims, is_unverified
from mkbsim.lab import ChainLinks, HopRecord
from mkbsim.metrics._clusters import ClusterBootstrap, add_adjusted, ratio_of_sums
from mkbsim.metrics._sections import ALL, GROUP_STATS, _cell_seed, cell_stats
from mkbsim.skills._tables import interval, pvalue, render, share, signed

Row = dict[str, Any]
#: claim survival counts of one chain's hop, and the row keys of their shares
SURVIVAL = (("origin_survival", "origin_kept", "origin_claims"), ("carried", "carried_claims", "previous_claims"),
            ("unverified_carried", "unverified_kept", "unverified_claims"))  # fmt: skip


@dataclass(frozen=True)
class HopSurvival:
    """One chain's hop: how many of the origin's, the previous hop's, and its unverified claims it kept."""

    model: str
    problem: str
    hop: int
    counts: Mapping[str, int]


def chain_report(
    links: Sequence[ChainLinks], skills: Mapping[str, str], records: Sequence[HopRecord], link: Linker
) -> list[Row]:
    """One row per model × hop, the models pooled ("all") first: outcome and lift of ``records``
    (``lab.transfer.hop_records``) and claim survival along ``links`` (``lab.chains.links``) across the
    campaign's ``skills`` (by attempt: ``lab.skills.campaign_skills``)."""
    survival = claim_survival(links, skills, link)
    cells: dict[tuple[str, int], tuple[list[HopRecord], list[HopSurvival]]] = {}
    for record in records:
        for model in (ALL, record.comparison.model):
            cells.setdefault((model, record.hop), ([], []))[0].append(record)
    for kept in survival:
        for model in (ALL, kept.model):
            cells.setdefault((model, kept.hop), ([], []))[1].append(kept)
    rows = []
    for (model, hop), (hop_records, kept_claims) in sorted(cells.items(), key=lambda kv: (kv[0][0] != ALL, kv[0])):
        rows.append({"model": model, "hop": hop} | _outcome(hop_records, (model, str(hop)))
                    | _survival(kept_claims, (model, str(hop), "survival")))  # fmt: skip
    add_adjusted(rows)
    return rows


def claim_survival(links: Iterable[ChainLinks], skills: Mapping[str, str], link: Linker) -> list[HopSurvival]:
    """Per chain and hop, the claims kept from the origin (the skill hop 1 read), from the previous hop,
    and of the previous hop's unverified claims."""
    sentences = {a: [c.text for c in extract_claims(t)] for a, t in skills.items()}
    link.warm([s for texts in sentences.values() for s in texts])
    out = []
    for chain in links:
        origin = sentences.get(chain.hops[1][1] or "", []) if 1 in chain.hops else []
        for hop in sorted(chain.hops):
            attempt, source = chain.hops[hop]
            mine, previous = sentences.get(attempt, []), sentences.get(source or "", [])
            carried = {x.source for x in link.link(previous, mine)}
            unverified = [i for i, s in enumerate(previous) if is_unverified(s)]
            out.append(HopSurvival(chain.model, chain.problem, hop, {
                "origin_kept": len(link.link(origin, mine)), "origin_claims": len(origin),
                "carried_claims": len(carried), "previous_claims": len(previous),
                "unverified_kept": sum(1 for i in unverified if i in carried), "unverified_claims": len(unverified),
            }))  # fmt: skip
    return out


def _outcome(records: Sequence[HopRecord], key: Sequence[str]) -> Row:
    """The cell's report statistics (lift, help, harm, intervals, p) and its scored pass rate."""
    if not records:  # a hop whose comparisons are all still pending
        return {"directions": "", "pass_rate": None, "pass_rate_ci": None} | dict.fromkeys(GROUP_STATS) | {"n": 0}
    seed = _cell_seed(key, 0)
    stats = cell_stats([r.comparison for r in records], seed=seed)
    passed = [float(r.treatment_passed) for r in records]
    boot = ClusterBootstrap([r.comparison.problem for r in records], seed=seed)
    return {
        "directions": ",".join(sorted({r.comparison.direction for r in records})),
        "pass_rate": sum(passed) / len(records),
        "pass_rate_ci": boot.interval(ratio_of_sums, passed, [1.0] * len(records)),
    } | stats


def _survival(kept: Sequence[HopSurvival], key: Sequence[str]) -> Row:
    row: Row = {"chains": len(kept)}
    boot = ClusterBootstrap([k.problem for k in kept], seed=_cell_seed(key, 0)) if kept else None
    for name, part, whole in SURVIVAL:
        numerator = [float(k.counts[part]) for k in kept]
        denominator = [float(k.counts[whole]) for k in kept]
        total = sum(denominator)
        row[name] = sum(numerator) / total if total else None
        row[f"{name}_ci"] = boot.interval(ratio_of_sums, numerator, denominator) if boot and total else None
    return row


def render_chain(rows: Sequence[Row], campaign_id: str, link: Linker) -> str:
    headers = ("model", "hop", "n", "pass", "skip", "lift vs solo", "95% CI", "help", "harm", "pHolm",
               "origin kept", "carried", "unverif. carried")  # fmt: skip
    body = [
        (r["model"], str(r["hop"]), str(r["n"]), share(r["pass_rate"]), str(r["skipped"]), signed(r["paired_lift"]),
         interval(r["paired_lift_ci"], percent=True, digits=1) + "*" * (r.get("paired_lift_ci_method") == "t"),
         share(r["help_rate"]), share(r["harm_rate"]), pvalue(r["p_holm"]), share(r["origin_survival"]),
         share(r["carried"]), share(r["unverified_carried"]))
        for r in rows
    ]  # fmt: skip
    title = (f"chain campaign {campaign_id}: hops alternate DSLs (both starting DSLs pooled); all = models pooled;\n"
             f"claims linked by {link.note}, threshold {link.threshold};\n"
             "95% CI over problems (cluster bootstrap; t on log r under 20 problems*); p: sign flips of problems'"
             " log r, Holm across the table; every share's CI: JSON")  # fmt: skip
    return render(title, headers, body)
