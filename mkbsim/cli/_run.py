"""`mkbsim run`: a simulated campaign (profiles × problems × 4 arms × replicates) into an event store,
then the transfer report of that campaign. Running the same command again resumes the campaign."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mkbsim.cli._common import add_store_option, non_negative_int, open_store, positive_int
from mkbsim.errors import UserError

if TYPE_CHECKING:
    from mkbsim.campaigns import SimCampaign

_SIM_OPTIONS = ("problems", "profiles", "replicates", "seed")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run a simulated campaign (default: six profiles × 74 problems × 4 arms) and report it",
        description="Simulated agents attempt every selected problem solo in both DSLs and once more with the "
        "other DSL's skill; every attempt's events go to the store, then the transfer report is printed. "
        "Same options and seed → byte-identical event payloads. Running the same command again resumes the "
        "campaign (finished attempts are kept; interrupted and infra_error ones run again).",
    )
    add_store_option(p)
    p.add_argument("--problems", metavar="SPEC", help="ids, names, families, ranges (p01-p09) or globs (default: all)")
    p.add_argument("--profiles", metavar="A,B", help="simulated-model profiles, comma-separated (default: all six)")
    p.add_argument("--replicates", type=positive_int, metavar="N", help="replicates per problem (default 1)")
    p.add_argument("--seed", type=non_negative_int, metavar="N", help="campaign seed (default 0)")
    p.add_argument(
        "--campaign", type=Path, metavar="FILE",
        help="a campaign file: kind = \"simulated\" (examples/simulated.toml) or an LLM campaign "
        "(examples/llm.toml, real models through litellm); resumes when run again",
    )  # fmt: skip
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="where attempts run: here (default; a process pool, or threads for LLM attempts) "
                   "or as Ray tasks")  # fmt: skip
    p.add_argument("--ray-address", metavar="ADDR", help="an existing Ray cluster (auto or host:port; --executor ray)")
    p.add_argument("--workers", type=positive_int, metavar="N", help="attempts at once (default: the file's "
                   "limits.agents, else this machine's cores for simulated campaigns and 1 for LLM ones)")  # fmt: skip
    p.add_argument("--new-campaign", action="store_true",
                   help="when the plan fingerprint changed (problem definitions, verifier protocol or config), "
                   "start a separate campaign instead of refusing")  # fmt: skip
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from mkbsim.campaigns import Limits, SimCampaign, campaign_kind, default_workers, load_simulated_campaign

    if args.campaign is not None:
        given = [f"--{o}" for o in _SIM_OPTIONS if getattr(args, o) is not None]
        if given:
            raise UserError(f"{given[0]} cannot be combined with --campaign (set it in the campaign file)")
        if campaign_kind(args.campaign) == "llm":
            from mkbsim.cli._agents import run_campaign_file

            if args.new_campaign:
                raise UserError("--new-campaign applies to simulated campaigns (give an LLM campaign a new id)")
            if args.ray_address and args.executor != "ray":
                raise UserError("--ray-address needs --executor ray")
            return run_campaign_file(args.campaign, args.store, workers=args.workers, executor=args.executor,
                                     ray_address=args.ray_address)  # fmt: skip
        campaign = load_simulated_campaign(args.campaign)
    else:
        from mkbsim.simulator import CampaignConfig, get_profile, select_problems, shipped_profiles

        names = [n.strip() for n in (args.profiles or "").split(",") if n.strip()] or list(shipped_profiles())
        profiles = tuple(get_profile(n) for n in dict.fromkeys(names))
        config = CampaignConfig(profiles, tuple(select_problems(args.problems)), args.replicates or 1, args.seed or 0)
        campaign = SimCampaign(config, limits=Limits(default_workers()))
    if args.workers is not None:
        campaign = dataclasses.replace(campaign, limits=dataclasses.replace(campaign.limits, agents=args.workers))
    return _simulate(args, campaign)


def _simulate(args: argparse.Namespace, campaign: SimCampaign) -> int:
    from mkbsim.campaigns import run_simulated

    if campaign.chain is not None:
        return _chain(args, campaign, campaign.chain)
    skill_filter = None
    if campaign.filter is not None:  # found through its entry point: mkbsim never imports skill_filters
        from mkbsim.plugins import get_filter

        chosen = get_filter(campaign.filter)
        skill_filter = lambda text: chosen.apply(text).text  # noqa: E731
    with open_store(args.store, create=True) as store:
        result = run_simulated(store, campaign, executor=args.executor, ray_address=args.ray_address,
                               new_campaign=args.new_campaign, progress=True, skill_filter=skill_filter)  # fmt: skip
    if result.already_finished:
        print(f"campaign {result.campaign_id} (same options and seed) is already in {args.store}; its report:")
        return _report(args.store, result.campaign_id)
    if result.stopped_by is not None:
        print(
            f"campaign {result.campaign_id}: stopped by {result.stopped_by}; {result.ran:,} attempts ran, "
            f"{result.interrupted:,} in flight recorded as interrupted; run the same command again to resume"
        )
        return 130 if result.stopped_by == "SIGINT" else 143
    kept = f" ({result.kept:,} kept from earlier runs)" if result.kept else ""
    print(f"campaign {result.campaign_id}: {result.attempts:,} attempts{kept}, {result.events:,} events → {args.store}")
    sys.stdout.flush()
    return _report(args.store, result.campaign_id)


def _chain(args: argparse.Namespace, campaign: SimCampaign, hops: int) -> int:
    """``chain = K``: the chain protocol on the campaign's profiles, problems and seed (in this process)."""
    from mkbsim.cli._chain import run_and_report_chain
    from mkbsim.metrics._rules import DIRECTIONS
    from mkbsim.simulator import ChainConfig

    if args.executor != "local" or args.ray_address:
        raise UserError("campaign.chain: chains run in this process; drop --executor ray / --ray-address")
    if campaign.filter is not None or set(campaign.directions) != set(DIRECTIONS):
        raise UserError("campaign.chain: a chain alternates both DSLs from both starts and reads skills verbatim; "
                        "it takes neither `filter` nor a subset of `directions`")  # fmt: skip
    return run_and_report_chain(args.store, ChainConfig(campaign.sim, hops))


def _report(store: object, campaign_id: str) -> int:
    """The campaign's summary: the report by model × direction (the family breakdown is one command away)."""
    from mkbsim.cli._main import build_parser

    argv = ["report", "--store", str(store), "--campaign", campaign_id, "--by", "model,direction"]
    report = build_parser().parse_args(argv)
    code = int(report.handler(report) or 0)
    print(f"\nby family as well: mkbsim report --store {store} --campaign {campaign_id}")
    return code
