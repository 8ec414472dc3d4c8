"""`mkbsim run`: a campaign — simulated from options (default: six profiles × 74 problems × 4 arms) or
described by a campaign file (simulated or LLM) — run or resumed by the campaign lifecycle
(``mkbsim.campaigns.run_campaign``), then its report."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mkbsim.cli._common import add_store_option, non_negative_int, open_store, positive_int
from mkbsim.errors import UserError

if TYPE_CHECKING:
    from mkbsim.campaigns import Campaign, CampaignSummary, SkillTransform

_SIM_OPTIONS = ("problems", "profiles", "replicates", "seed", "controls")
#: Exit code of a campaign that measured nothing: every attempt it ran ended in infra_error.
ALL_INFRA_ERROR = 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run a campaign (default: six simulated profiles × 74 problems × 4 arms) and report it",
        description="Agents attempt every selected problem solo in both DSLs and once more with the other DSL's "
        "skill (and, with --controls, in the control arms beside each); every attempt's events go to the store, "
        "then the transfer report is printed. Same options and seed → byte-identical event payloads. Running the "
        "same command again resumes the campaign (finished attempts are kept; interrupted and infra_error ones run "
        "again). Exit 1 when every attempt ended in infra_error (the reasons are printed).",
    )
    add_store_option(p)
    p.add_argument("--problems", metavar="SPEC", help="ids, names, families, ranges (p01-p09) or globs (default: all)")
    p.add_argument("--profiles", metavar="A,B",
                   help="simulated-model profiles, comma-separated: shipped names or profile files (FILE.toml, e.g. "
                   "from `mkbsim calibrate --write`; default: the shipped six)")  # fmt: skip
    p.add_argument("--replicates", type=positive_int, metavar="N", help="replicates per problem (default 1)")
    p.add_argument("--seed", type=non_negative_int, metavar="N", help="campaign seed (default 0)")
    p.add_argument("--controls", type=_controls, metavar="ARMS",
                   help="control arms beside each direction's treatment, comma-separated: aa (a second solo), "
                   "placebo (another problem's skill of the family), matched (a neutral note as long as the "
                   "skill)")  # fmt: skip
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
    p.add_argument("--similarity", choices=("auto", "minilm", "lexical"), default="auto",
                   help="a chain campaign's claim linking, as `mkbsim chain --similarity` (auto: MiniLM embeddings "
                   "when installed, else lexical cosine)")  # fmt: skip
    p.add_argument("--new-campaign", action="store_true",
                   help="when the plan fingerprint changed (problem definitions, verifier protocol or config), "
                   "start a separate campaign instead of refusing")  # fmt: skip
    p.set_defaults(handler=_run)


def _controls(text: str) -> tuple[str, ...]:
    from mkbsim.campaigns import CONTROLS

    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in CONTROLS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"use {', '.join(CONTROLS)}; got {bad[0] if bad else text!r}")
    return tuple(n for n in CONTROLS if n in names)


def _run(args: argparse.Namespace) -> int:
    from mkbsim.campaigns import run_campaign

    if args.ray_address and args.executor != "ray":
        raise UserError("--ray-address needs --executor ray")
    campaign, transform, scope = _campaign(args)
    with scope, open_store(args.store, create=True) as store:
        summary = run_campaign(store, campaign, executor=args.executor, ray_address=args.ray_address,
                               new_campaign=args.new_campaign, progress=True, skill_filter=transform)  # fmt: skip
    return conclude(summary, args.store, chain=getattr(campaign, "chain", None) is not None,
                    similarity=args.similarity)  # fmt: skip


def _campaign(
    args: argparse.Namespace,
) -> tuple[Campaign, SkillTransform | None, contextlib.AbstractContextManager[object]]:
    """The campaign the options or the file describe, its skill filter, and what must stay open while it runs
    (an LLM campaign's verifiers)."""
    from mkbsim.campaigns import SimCampaign, campaign_kind, default_workers, load_simulated_campaign
    from mkbsim.cli._agents import skill_transform

    if args.campaign is not None:
        given = [f"--{o}" for o in _SIM_OPTIONS if getattr(args, o) is not None]
        if given:
            raise UserError(f"{given[0]} cannot be combined with --campaign (set it in the campaign file)")
        if campaign_kind(args.campaign) == "llm":
            from mkbsim.cli._agents import llm_campaign

            if args.new_campaign:
                raise UserError("--new-campaign applies to simulated campaigns (give an LLM campaign a new id)")
            return llm_campaign(args.campaign, workers=args.workers, executor=args.executor,
                                ray_address=args.ray_address)  # fmt: skip
        campaign = load_simulated_campaign(args.campaign)
    else:
        from mkbsim.simulator import CampaignConfig, resolve_profiles, select_problems

        profiles = resolve_profiles([n.strip() for n in (args.profiles or "").split(",") if n.strip()])
        config = CampaignConfig(profiles, tuple(select_problems(args.problems)), args.replicates or 1, args.seed or 0)
        campaign = SimCampaign(config, workers=default_workers(), controls=args.controls or ())
    if args.workers is not None:
        campaign = dataclasses.replace(campaign, workers=args.workers)
    return campaign, skill_transform(campaign.filter, "campaign.filter: "), contextlib.nullcontext()


def conclude(summary: CampaignSummary, store: Path, *, chain: bool = False, similarity: str = "auto",
             fmt: str = "table", plots: Path | None = None) -> int:  # fmt: skip
    """Say what the run did; then the campaign's report (per hop for a chain), or why there is none."""
    cid = summary.campaign_id
    if fmt == "table":
        for line in summary.lines():
            print(line)
        print(f"{summary.events:,} events appended to {store}")
    if summary.stopped_by is not None:
        print(f"campaign {cid}: stopped by {summary.stopped_by}; {summary.interrupted:,} attempts in flight recorded "
              "as interrupted; run the same command again to resume")  # fmt: skip
        return 130 if summary.stopped_by == "SIGINT" else 143
    if summary.all_infra_error:
        sys.stderr.write(f"campaign {cid}: every attempt ended in infra_error, nothing was measured:\n")
        sys.stderr.writelines(f"  {n:,} × {reason}\n" for reason, n in summary.infra_reasons.most_common())
        return ALL_INFRA_ERROR
    sys.stdout.flush()
    if chain:
        from mkbsim.cli._chain import report_chain

        if summary.already_finished:
            print(f"chain campaign {cid} is already in {store}; reporting it", file=sys.stderr)
        return report_chain(store, cid, similarity=similarity, fmt=fmt, plots=plots)
    if summary.already_finished:
        print(f"campaign {cid} (same options and seed) is already in {store}; its report:")
    return _report(store, cid)


def _report(store: Path, campaign_id: str) -> int:
    """The campaign's summary: the report by model × direction (the family breakdown is one command away)."""
    from mkbsim.cli._main import build_parser

    argv = ["report", "--store", str(store), "--campaign", campaign_id, "--by", "model,direction"]
    report = build_parser().parse_args(argv)
    code = int(report.handler(report) or 0)
    print(f"\nby family as well: mkbsim report --store {store} --campaign {campaign_id}")
    return code
