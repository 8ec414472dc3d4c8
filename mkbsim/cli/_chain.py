"""`mkbsim chain`: simulated multi-hop skill chains (A → B → A → …) — a chain campaign run or resumed by the
campaign lifecycle (``mkbsim.campaigns.run_campaign``) — then per-hop outcome, lift vs solo and claim survival."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mkbsim.cli._common import add_store_option, non_negative_int, open_lab, open_store, positive_int


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "chain",
        help="simulated multi-hop skill chains: per-hop outcome, lift vs solo, claim survival",
        description="For every profile × problem, both solos and, from each starting DSL, a chain of K hops "
        "alternating DSLs where each hop reads the previous hop's skill; then the per-hop report. Same options "
        "and seed → the same chain campaign (a second run reports the stored one).",
    )
    add_store_option(p)
    p.add_argument("--hops", type=positive_int, required=True, metavar="K", help="hops after the first solo")
    p.add_argument("--problems", metavar="SPEC", help="ids, names, families, ranges or globs (default: all)")
    p.add_argument("--profiles", metavar="A,B", help="simulated-model profiles, comma-separated (default: all)")
    p.add_argument("--seed", type=non_negative_int, default=0, metavar="N", help="campaign seed (default 0)")
    p.add_argument("--similarity", choices=("auto", "minilm", "lexical"), default="auto",
                   help="claim linking: MiniLM embeddings (auto: when installed) or lexical cosine")  # fmt: skip
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(handler=_chain)


def _chain(args: argparse.Namespace) -> int:
    from mkbsim.campaigns import SimCampaign, run_campaign
    from mkbsim.cli._run import conclude
    from mkbsim.simulator import CampaignConfig, get_profile, select_problems, shipped_profiles

    names = [n.strip() for n in args.profiles.split(",") if n.strip()] if args.profiles else list(shipped_profiles())
    profiles = tuple(get_profile(n) for n in dict.fromkeys(names))
    config = CampaignConfig(profiles, tuple(select_problems(args.problems)), seed=args.seed)
    with open_store(args.store, create=True) as store:
        summary = run_campaign(store, SimCampaign(config, chain=args.hops), progress=args.format == "table")
    return conclude(summary, args.store, chain=True, similarity=args.similarity, fmt=args.format)


def report_chain(store_path: Path, campaign_id: str, *, similarity: str = "auto", fmt: str = "table") -> int:
    """The per-hop report of the chain campaign ``campaign_id``."""
    from mkbsim.claims import linker
    from mkbsim.skills._chain import chain_report, render_chain

    with open_lab(store_path) as lab:
        links = lab.chains.links(campaign_id)
        skills, records = lab.skills.campaign_skills(campaign_id), lab.transfer.hop_records(campaign_id)
    link = linker(similarity)
    rows = chain_report(links, skills, records, link)
    if fmt == "json":
        out = {"campaign_id": campaign_id, "similarity": link.method, "threshold": link.threshold, "hops": rows}
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        sys.stdout.write(render_chain(rows, campaign_id, link))
    return 0
