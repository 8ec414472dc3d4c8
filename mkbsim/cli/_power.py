"""`mkbsim power`: problems × replicates needed to detect a lift at 80% power per model × direction cell,
and a stored campaign's minimum detectable lift, by simulation with the cluster structure (DESIGN §6)."""

from __future__ import annotations

import argparse
import json
import math
import sys

from mkbsim.cli._common import add_store_option, open_lab, positive_int
from mkbsim.errors import UserError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "power",
        help="problems × replicates needed to detect a lift at 80%% power; a campaign's minimum detectable lift",
        description="Simulates campaigns with each cell's spread of log r (from the store, or --sd for an assumed "
        "effect) and tests them as the report tests small cells (t on problems' mean log r, alpha 0.05).",
    )
    add_store_option(p)
    p.add_argument("--campaign", metavar="ID", help="only this campaign (default: every campaign, pooled)")
    p.add_argument("--lift", type=float, default=0.10, metavar="X", help="the lift to detect (default 0.10 = 10%%)")
    p.add_argument("--sd", type=float, metavar="S", help="an assumed SD of log r (no store read): one cell")
    p.add_argument("--icc", type=float, metavar="F",
                   help="share of log r variance between problems (default: estimated from replicates, else 1)")
    p.add_argument("--problems", type=positive_int, default=74, metavar="N", help="with --sd: the design's problems")
    p.add_argument("--replicates", type=positive_int, default=1, metavar="R", help="with --sd: its replicates")
    p.add_argument("--simulations", type=positive_int, default=2000, metavar="N", help="per design (default 2000)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(handler=_power)


def _power(args: argparse.Namespace) -> int:
    from mkbsim.metrics._power import CellSpread, power_report, spread

    if not -1.0 < args.lift <= 10.0 or args.lift == 0:
        raise UserError(f"--lift {args.lift}: expected a non-zero lift above -1 (e.g. 0.1 for 10%)")
    if args.icc is not None and not 0.0 <= args.icc <= 1.0:
        raise UserError(f"--icc {args.icc}: expected a share between 0 and 1")
    if args.sd is not None:
        if args.sd <= 0:
            raise UserError(f"--sd {args.sd}: expected a positive SD of log r")
        cells = [CellSpread("assumed", "–", args.problems * args.replicates, args.problems, args.replicates, args.sd,
                            1.0 if args.icc is None else args.icc)]  # fmt: skip
    else:
        with open_lab(args.store) as lab:
            if lab.head == 0:
                raise UserError(f"{args.store}: the store has no events yet (run a campaign first, or give --sd)")
            records = lab.transfer.report_data(args.campaign).comparisons
        by_cell: dict[tuple[str, str], list[tuple[float, str]]] = {}
        for c in records:
            by_cell.setdefault((c.model, c.direction), []).append((math.log(c.r), c.problem))
        cells = [spread(m, d, [v for v, _ in xs], [p for _, p in xs], args.icc)
                 for (m, d), xs in sorted(by_cell.items())]
        if not cells:
            raise UserError("no resolved comparison to estimate a spread from (or give --sd)")
    rows = power_report(cells, args.lift, simulations=args.simulations,
                        progress=lambda cell: print(f"power: {cell}…", file=sys.stderr, flush=True))  # fmt: skip
    if args.format == "json":
        sys.stdout.write(json.dumps({"lift": args.lift, "target_power": 0.8, "cells": rows}, indent=2) + "\n")
        return 0
    print(f"Power by simulation ({args.simulations} campaigns per design; t on problems' mean log r, alpha 0.05)")
    print(f"mdl: the design's minimum detectable lift at 80% power; P×R: problems needed for {args.lift:+.0%}")
    reps = list(rows[0]["problems_needed"]) if rows else []  # type: ignore[call-overload]
    print(f"{'model':<22}{'dir':<14}{'n':>5}{'sd':>6}{'icc':>6}{'mdl':>8}" + "".join(f"{'R=' + r:>8}" for r in reps))
    for r in rows:
        mdl = r["minimum_detectable_lift"]
        needed = r["problems_needed"]
        assert isinstance(needed, dict)
        print(f"{str(r['model'])[:21]:<22}{str(r['direction']).replace('2', '→', 1)[:13]:<14}{r['n']:>5}"
              f"{r['sd_log_r']:>6.2f}{r['icc']:>6.2f}{'–' if mdl is None else f'{mdl:+.0%}':>8}"
              + "".join(f"{'>500' if needed[x] is None else needed[x]:>8}" for x in reps))  # fmt: skip
    return 0
