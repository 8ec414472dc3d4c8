"""`mkbsim run`: a simulated campaign (profiles × problems × 4 arms × replicates) into an event store,
then the transfer report of that campaign."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mkbsim.cli._common import add_store_option, non_negative_int, open_store, positive_int


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run a simulated campaign (default: six profiles × 74 problems × 4 arms) and report it",
        description="Simulated agents attempt every selected problem solo in both DSLs and once more with the "
        "other DSL's skill; every attempt's events go to the store, then the transfer report is printed. "
        "Same options and seed → byte-identical event payloads.",
    )
    add_store_option(p)
    p.add_argument("--problems", metavar="SPEC", help="ids, names, families, ranges (p01-p09) or globs (default: all)")
    p.add_argument("--profiles", metavar="A,B", help="simulated-model profiles, comma-separated (default: all six)")
    p.add_argument("--replicates", type=positive_int, default=1, metavar="N", help="replicates per problem (default 1)")
    p.add_argument("--seed", type=non_negative_int, default=0, metavar="N", help="campaign seed (default 0)")
    p.add_argument(
        "--campaign", type=Path, metavar="FILE",
        help="an LLM campaign file (see examples/llm.toml): real models through litellm; resumes when run again",
    )  # fmt: skip
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    if args.campaign is not None:
        from mkbsim.cli._agents import run_campaign_file

        return run_campaign_file(args.campaign, args.store)
    from mkbsim.simulator import (
        CampaignConfig,
        CampaignExists,
        get_profile,
        run_campaign,
        select_problems,
        shipped_profiles,
    )

    names = [n.strip() for n in args.profiles.split(",") if n.strip()] if args.profiles else list(shipped_profiles())
    profiles = tuple(get_profile(n) for n in dict.fromkeys(names))
    config = CampaignConfig(profiles, tuple(select_problems(args.problems)), args.replicates, args.seed)
    with open_store(args.store, create=True) as store:
        try:
            summary = run_campaign(store, config, progress=True)
        except CampaignExists as exc:
            if not exc.finished:
                raise
            print(f"campaign {exc.campaign_id} (same options and seed) is already in {args.store}; its report:")
            return _report(args.store, exc.campaign_id)
    print(f"campaign {summary.campaign_id}: {summary.attempts:,} attempts, {summary.events:,} events → {args.store}")
    sys.stdout.flush()
    return _report(args.store, summary.campaign_id)


def _report(store: object, campaign_id: str) -> int:
    from mkbsim.cli._main import build_parser

    report = build_parser().parse_args(["report", "--store", str(store), "--campaign", campaign_id])
    return int(report.handler(report) or 0)
