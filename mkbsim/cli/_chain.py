"""`mkbsim chain`: simulated multi-hop skill chains (A → B → A → …), then per-hop outcome, lift vs
solo and claim survival."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mkbsim.cli._common import add_store_option, non_negative_int, open_lab, open_store, positive_int

if TYPE_CHECKING:
    from mkbsim.simulator import ChainConfig


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
    from mkbsim.simulator import CampaignConfig, ChainConfig, get_profile, select_problems, shipped_profiles

    names = [n.strip() for n in args.profiles.split(",") if n.strip()] if args.profiles else list(shipped_profiles())
    profiles = tuple(get_profile(n) for n in dict.fromkeys(names))
    config = ChainConfig(CampaignConfig(profiles, tuple(select_problems(args.problems)), seed=args.seed), args.hops)
    return run_and_report_chain(args.store, config, similarity=args.similarity, fmt=args.format)


def run_and_report_chain(store_path: Path, config: ChainConfig, *, similarity: str = "auto", fmt: str = "table") -> int:
    """Run the chain campaign ``config`` into the store, or find it there; print its report."""
    from mkbsim.claims import linker
    from mkbsim.simulator import CampaignExists, run_chains
    from mkbsim.skills._chain import chain_report, render_chain

    with open_store(store_path, create=True) as store:
        try:
            cid = run_chains(store, config).campaign_id
        except CampaignExists as exc:
            if not exc.finished:
                raise
            cid = exc.campaign_id
            print(f"chain campaign {cid} is already in {store_path}; reporting it", file=sys.stderr)
    with open_lab(store_path) as lab:
        links, skills, records = lab.chains.links(cid), lab.skills.campaign_skills(cid), lab.transfer.hop_records(cid)
    link = linker(similarity)
    rows = chain_report(links, skills, records, link)
    if fmt == "json":
        out = {"campaign_id": cid, "similarity": link.method, "threshold": link.threshold, "hops": rows}
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        sys.stdout.write(render_chain(rows, cid, link))
    return 0
