"""`mkbsim report`: paired lift, help/harm, standing, family sensitivity, direction asymmetry, solo
quality (DESIGN §6, §9), as a table, JSON or CSV, with optional exports and plots."""

from __future__ import annotations

import argparse
import gc
import json
import sys
from pathlib import Path

from mkbsim.cli._common import add_store_option, open_lab
from mkbsim.errors import UserError

# kept in step with mkbsim.metrics._sections (not imported here: `mkbsim --help` stays light)
_DIMENSIONS = ("campaign", "model", "direction", "family")
_DEFAULT_BY = ("model", "direction", "family")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report",
        help="transfer metrics: paired lift, help/harm, standing, sensitivity, asymmetry, solo quality",
        description="Brings the projections up to date (computing them apart from a read-only store), checks the "
        "store file for damage, then reports the plain-protocol comparisons.",
    )
    add_store_option(p)
    p.add_argument("--campaign", metavar="ID", help="only this campaign (default: every campaign, pooled)")
    p.add_argument(
        "--by",
        type=_dimensions,
        metavar="DIMS",
        help="comma-separated grouping from campaign,model,direction,family (default: model,direction,family; "
        "the skills section: model, from model,direction,family)",
    )
    p.add_argument("--format", choices=("table", "json", "csv"), default="table",
                   help="table (80 columns), json (every section) or csv (the groups)")  # fmt: skip
    p.add_argument("--export", metavar="DIR", type=Path,
                   help="also write every projection table and report section as CSV and Parquet")  # fmt: skip
    p.add_argument("--plots", metavar="DIR", type=Path, help="also write PNG figures")
    p.add_argument("--section", choices=("transfer", "skills", "controls", "model", "robustness"), default="transfer",
                   help="transfer (default: the metrics above); skills (category prevalence, follow levels, "
                   "claim propagation, failure classes, follow-lift correlation); controls (control arms beside the "
                   "treatment); model (mixed-effects model of log r, logistic model of verdict flips); robustness "
                   "(conclusions under other metric settings)")  # fmt: skip
    p.add_argument("--labeler", metavar="NAME",
                   help="skills section: whose labels, in every table (default: ground_truth if present, else "
                   "heuristic; heuristic without stored labels runs the heuristic labeler)")  # fmt: skip
    p.add_argument("--similarity", choices=("auto", "minilm", "lexical"), default="auto",
                   help="skills section: claim linking (auto: MiniLM when installed, else lexical)")  # fmt: skip
    p.set_defaults(handler=_report)


def _dimensions(text: str) -> tuple[str, ...]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [n for n in names if n not in _DIMENSIONS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"expected dimensions from {','.join(_DIMENSIONS)}, got {text!r}")
    return tuple(d for d in _DIMENSIONS if d in names)


def _report(args: argparse.Namespace) -> int:
    if args.section == "skills":
        return _skills(args)
    if args.section in ("model", "robustness"):
        return _rescored(args)
    args.by = args.by or _DEFAULT_BY
    require_directory(args.export, "--export")
    require_directory(args.plots, "--plots")
    # what the report imports (numpy, the store, the metrics) and then reads and computes (~100k records
    # and rows, living until the report is printed) holds no garbage cycle: the cyclic collector would
    # only walk them again and again (~8% of the command)
    gc.disable()
    try:
        from mkbsim.metrics._render import controls_table, groups_csv, table
        from mkbsim.metrics._sections import DEFAULT_BY, report

        with open_lab(args.store) as lab:
            _require_events(lab.head, args.store)
            data = lab.transfer.report_data(args.campaign)
            result = report(data.campaigns, data.comparisons, data.solos, pending=data.pending, by=args.by,
                            controls=data.controls)  # fmt: skip
            tables = lab.transfer.projection_tables() if args.export is not None else None
    finally:
        gc.enable()
    notes = []
    if tables is not None:
        from mkbsim.metrics._export import export

        written = export(tables, result, args.export)
        notes.append(f"wrote {len(written)} files (CSV and Parquet) to {args.export}")
    if args.plots is not None:
        from mkbsim.metrics._plots import write_plots

        by_cell = result if tuple(args.by) == DEFAULT_BY else report(
            data.campaigns, data.comparisons, data.solos, pending=data.pending, controls=data.controls
        )  # fmt: skip
        if by_cell["groups"]:
            notes.append(f"wrote {len(write_plots(by_cell, args.plots))} figures to {args.plots}")
        else:
            notes.append("no plots: no resolved comparison yet")
    if args.format == "json":
        sys.stdout.write(json.dumps(result, indent=2, allow_nan=False) + "\n")
    elif args.format == "csv":
        sys.stdout.write(groups_csv(result))
    elif args.section == "controls":
        sys.stdout.write(controls_table(result, store=str(args.store)))
    else:
        sys.stdout.write(table(result, store=str(args.store)))
    for note in notes:  # on stderr under json/csv, so stdout stays machine-readable
        print(note, file=sys.stdout if args.format == "table" else sys.stderr)
    # everything is written and closed: the program may stop without the interpreter's teardown
    # (mkbsim.cli._main); not after exports and plots, whose libraries may clean up at exit
    args.exit_at_once = args.export is None and args.plots is None
    return 0


def _skills(args: argparse.Namespace) -> int:
    from mkbsim.claims import cache_for, linker
    from mkbsim.progress import Progress
    from mkbsim.skills._label import GROUND_TRUTH
    from mkbsim.skills._report import render_skills, skills_report

    if args.format == "csv" or args.export is not None or args.plots is not None:
        raise UserError("--section skills prints a table or JSON only (no csv, --export or --plots)")
    by = args.by or ("model",)
    if "campaign" in by:
        raise UserError("--section skills groups by model, direction or family (pick one campaign with --campaign)")
    progress = Progress()
    with open_lab(args.store) as lab:
        _require_events(lab.head, args.store)
        attempts = lab.skills.attempt_ids(args.campaign)
        labelers = lab.skills.labelers(attempts)
        name = args.labeler or (GROUND_TRUTH if GROUND_TRUTH in labelers else "heuristic")
        if args.labeler and args.labeler not in labelers and args.labeler != "heuristic":  # heuristic: run here
            raise UserError(f"no labels by {args.labeler!r} (labelers here: {', '.join(sorted(labelers)) or 'none'};"
                            " run mkbsim label)")  # fmt: skip
        with progress.step(f"reading the labels by {name}"):
            labels = lab.skills.labels(attempts, [name]).get(name)  # only the labeler every table uses
        # the heuristic labeler, where its labels are not stored, runs here on the trajectories; else the
        # report reads only the skills' texts (a tenth of the events)
        material = lab.skills.material(args.campaign, trajectories=labels is None, progress=progress)
        comparisons = lab.transfer.skill_comparisons(args.campaign)
    link = linker(args.similarity, cache=cache_for(args.store), progress=progress)
    with progress.step("extracting and linking the claims"):
        result = skills_report(comparisons, material, labels, name, link, by)
    if args.format == "json":
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        sys.stdout.write(render_skills(result))
    return 0


def _rescored(args: argparse.Namespace) -> int:
    """``--section model`` and ``--section robustness``: models and rescorings of the verdicts and runtimes."""
    from mkbsim.metrics._render import model_table, robustness_table

    if args.format == "csv" or args.export is not None or args.plots is not None:
        raise UserError(f"--section {args.section} prints a table or JSON only (no csv, --export or --plots)")
    with open_lab(args.store) as lab:
        _require_events(lab.head, args.store)
        records = (
            lab.transfer.verdict_records(args.campaign)
            if args.campaign is None or args.campaign in lab.transfer.campaigns()
            else None
        )
    if records is None:
        raise UserError(f"unknown campaign {args.campaign!r}")

    def progress(step: str) -> None:
        print(f"{args.section}: {step}…", file=sys.stderr, flush=True)

    if args.section == "model":
        from mkbsim.metrics._model import mixed_models

        result = mixed_models(records, progress)
        text = model_table
    else:
        from mkbsim.metrics._robustness import robustness

        result = robustness(records, progress)
        text = robustness_table
    if args.format == "json":
        sys.stdout.write(json.dumps(result, indent=2, allow_nan=False) + "\n")
    else:
        sys.stdout.write(text(result))
    return 0


def require_directory(target: Path | None, option: str) -> None:
    """Refuse an output directory that exists as something else, before any work is done."""
    if target is not None and target.exists() and not target.is_dir():
        raise UserError(f"{option} {target}: exists and is not a directory")


def _require_events(head: int, store: Path) -> None:
    if head == 0:
        raise UserError(f"{store}: the store has no events yet (run a campaign first: mkbsim run)")
