"""`mkbsim filter-test`: re-run a simulated campaign's skill-conditioned attempts with filtered skills
(same seeds, same solo baselines, same verifier protocol) as a new linked campaign — a variant of the stored
campaign's plan, run by the campaign lifecycle (``mkbsim.campaigns.run_campaign``) — and put filtered vs
unfiltered lift side by side per model × direction with paired tests."""

from __future__ import annotations

import argparse
import json
import sys

from mkbsim.cli._common import add_store_option, open_lab, open_store
from mkbsim.errors import UserError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "filter-test",
        help="re-run a campaign's treatments with filtered skills and compare lift (counterfactual)",
        description="Re-runs the skill-conditioned attempts of a simulated campaign with each source skill "
        "passed through a skill filter (one of --list; 'a+b' composes), against the same solo "
        "baselines, as a new campaign linked to the original; then reports filtered vs unfiltered paired lift "
        "on the shared comparisons with paired sign and Wilcoxon tests. Running it again reuses the stored rerun.",
    )
    add_store_option(p)
    p.add_argument("--campaign", metavar="ID", help="the campaign whose treatments are re-run")
    p.add_argument("--filter", metavar="NAME", help="skill filter name, or names joined by '+'")
    p.add_argument("--model", action="append", metavar="NAME", help="report only this model (repeatable)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--list", action="store_true", help="list the installed skill filters and exit")
    p.set_defaults(handler=_filter_test)


def _filter_test(args: argparse.Namespace) -> int:
    from mkbsim.plugins import filter_names, get_filter

    if args.list:
        for name in filter_names():
            print(f"{name:28} {get_filter(name).description}")
        return 0
    if not args.campaign or not args.filter:
        raise UserError("--campaign and --filter are required (or --list to see the filters)")
    from mkbsim.campaigns import rerun_campaign, run_campaign
    from mkbsim.cli._agents import skill_transform
    from mkbsim.skills._filter_test import filter_test_report, render_filter_test

    chosen = get_filter(args.filter)
    with open_store(args.store) as store:
        campaign = rerun_campaign(store, args.campaign, chosen.name)
        summary = run_campaign(store, campaign, progress=args.format == "table",
                               skill_filter=skill_transform(chosen.name))  # fmt: skip
        rerun = summary.campaign_id
        if summary.already_finished:
            print(f"the rerun {rerun} is already in {args.store}; reporting it", file=sys.stderr)
    with open_lab(args.store) as lab:
        known = lab.transfer.models(args.campaign)
        unknown = sorted(set(args.model or ()) - known)
        if unknown:
            listed = ", ".join(sorted(known))
            raise UserError(f"no model {', '.join(unknown)} in campaign {args.campaign} (known: {listed})")
        before, after = lab.transfer.ratios(args.campaign, None), lab.transfer.ratios(rerun, chosen.name)
    rows = filter_test_report(before, after, args.model)
    if args.format == "json":
        result = {"filter": chosen.name, "base_campaign_id": args.campaign, "campaign_id": rerun, "cells": rows}
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        sys.stdout.write(render_filter_test(rows, chosen.name, args.campaign, rerun))
    return 0
