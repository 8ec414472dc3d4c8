"""`mkbsim calibrate`: fit a simulated-model profile to target statistics and print target vs achieved."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from mkbsim.cli._common import non_negative_int, positive_int
from mkbsim.errors import UserError

if TYPE_CHECKING:
    from mkbsim.simulator import AgentProfile, FitResult, Target

DEFAULT_EVALUATIONS = 120


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "calibrate",
        help="fit a simulated-model profile to target statistics (scipy.optimize) and show target vs achieved",
        description="Evaluates the profile on a seeded simulated campaign (solo pass rates, passing-only speedups, "
        "paired lift, help and harm per direction, standing), fits the target's parameters with bounded Powell, "
        "and prints target vs achieved before and after. Shipped targets: mkbsim/simulator/targets/*.json.",
    )
    p.add_argument("--target", required=True, type=Path, metavar="FILE.json", help="target statistics (JSON)")
    p.add_argument("--profile", metavar="NAME|FILE.toml", help="profile to start from (default: the target's)")
    p.add_argument("--problems", metavar="SPEC",
                   help="problems of the fitting campaign (default: every second problem, p01, p03, …)")  # fmt: skip
    p.add_argument("--replicates", type=positive_int, default=1, metavar="N", help="replicates (default 1)")
    p.add_argument("--seed", type=non_negative_int, default=0, metavar="N", help="campaign seed (default 0)")
    p.add_argument("--evaluations", type=non_negative_int, default=DEFAULT_EVALUATIONS, metavar="N",
                   help=f"most objective evaluations (default {DEFAULT_EVALUATIONS}); 0 only evaluates")  # fmt: skip
    p.add_argument("--write", type=Path, metavar="FILE.toml", help="write the fitted profile here")
    p.set_defaults(handler=_calibrate)


def _calibrate(args: argparse.Namespace) -> int:
    from mkbsim.simulator import evaluate, get_profile, load_target, parse_profile, select_problems

    target = load_target(args.target)
    source = args.profile or target.profile
    path = Path(source)
    profile = (
        parse_profile(path.read_text(), str(path)) if path.suffix == ".toml" and path.exists() else get_profile(source)
    )
    problems = tuple(select_problems(args.problems)) if args.problems else tuple(select_problems(None)[::2])
    if args.write is not None and args.write.is_dir():
        raise UserError(f"--write {args.write}: is a directory")
    print(f"calibrating {profile.name} against {args.target} on {len(problems)} problems × {args.replicates} "
          f"replicate(s), seed {args.seed}")  # fmt: skip
    if args.evaluations == 0:
        achieved = evaluate(profile, problems, args.replicates, args.seed)
        _print_table(target, {"achieved": achieved})
        print(f"objective {target.objective(achieved):.2f} (sum of squared misses in tolerances)")
        return 0
    result = _fit_with_progress(target, profile, problems, args)
    _print_table(target, {"before": result.achieved_before, "after": result.achieved_after})
    print(f"objective {result.objective_before:.2f} → {result.objective_after:.2f} "
          f"after {result.evaluations} evaluations (sum of squared misses in tolerances)")  # fmt: skip
    changed = {n: (getattr(result.before, n), getattr(result.after, n)) for n in target.fit}
    print("fitted: " + ", ".join(f"{n} {a:.3g} → {b:.3g}" for n, (a, b) in changed.items()))
    if args.write is not None:
        args.write.write_text(result.after.to_toml())
        print(f"wrote {args.write}")
    return 0


def _fit_with_progress(target: Target, profile: AgentProfile, problems: tuple[str, ...], args: argparse.Namespace
                       ) -> FitResult:  # fmt: skip
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from mkbsim.progress import stderr_console
    from mkbsim.simulator import fit

    columns = (
        TextColumn("fitting"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("best objective {task.fields[best]}"),
    )
    with Progress(*columns, transient=True, console=stderr_console()) as bar:  # stdout: only the result
        task = bar.add_task("fit", total=args.evaluations, best="-")

        def show(n: int, best: float) -> None:
            bar.update(task, completed=min(n, args.evaluations), best=f"{best:.2f}")

        return fit(target, profile, problems, replicates=args.replicates, seed=args.seed,
                   max_evaluations=args.evaluations, on_evaluation=show)  # fmt: skip


def _print_table(target: Target, columns: dict[str, dict[str, float | None]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{target.profile} ({target.study_model})", title_justify="left")
    table.add_column("statistic")
    table.add_column("target", justify="right")
    table.add_column("±tol", justify="right")
    for name in columns:
        table.add_column(name, justify="right")
    table.add_column("within")
    last = list(columns.values())[-1]
    for stat_name, stat in target.statistics.items():
        tol = f"×/÷{2.718281828**stat.tolerance:.2f}" if stat.log_scale else f"{stat.tolerance:.3g}"
        values = [_fmt(v.get(stat_name)) for v in columns.values()]
        miss = stat.miss(last.get(stat_name))
        within = "yes" if abs(miss) <= 1 else ("n/a" if miss != miss else "no")
        label = stat_name + ("" if stat.stated else " (assumed)")
        table.add_row(label, _fmt(stat.value), tol, *values, within)
    Console().print(table)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
