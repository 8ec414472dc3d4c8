"""`mkbsim calibrate`: fit a simulated-model profile to the expectation of target statistics over seeds, and
print each target against the mean achieved value (± its seed-to-seed spread) and how often each of the
target's statements holds."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mkbsim.cli._common import non_negative_int, positive_int
from mkbsim.errors import UserError

if TYPE_CHECKING:
    from mkbsim.simulator import AgentProfile, Evaluation, FitResult, SeedPool, Target

DEFAULT_EVALUATIONS = 120
DEFAULT_SEEDS = 8


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "calibrate",
        help="fit a simulated-model profile to target statistics over seeds (scipy.optimize); target vs mean achieved",
        description="Evaluates the profile on simulated campaigns at seeds S..S+N-1 (the same seeds for every "
        "candidate: common random numbers), in parallel, fits the target's parameters with bounded Powell to the "
        "MEAN over seeds of every target statistic and to its statements holding with margin, and prints target vs "
        "mean ± seed-to-seed SD, and the share of seeds each statement holds at, before and after. Targets say "
        "whether the study states a value (`stated`, with its sentence) or it is assumed. Shipped targets: "
        "mkbsim/simulator/targets/*.json.",
    )
    p.add_argument("--target", required=True, type=Path, metavar="FILE.json", help="target statistics (JSON)")
    p.add_argument("--profile", metavar="NAME|FILE.toml", help="profile to start from (default: the target's)")
    p.add_argument("--problems", metavar="SPEC", help="problems of the fitting campaigns (default: all 74)")
    p.add_argument("--replicates", type=positive_int, default=1, metavar="N", help="replicates (default 1)")
    p.add_argument("--seeds", type=positive_int, default=DEFAULT_SEEDS, metavar="N",
                   help=f"campaigns per evaluation, seeds S..S+N-1 (default {DEFAULT_SEEDS})")  # fmt: skip
    p.add_argument("--seed", type=non_negative_int, default=0, metavar="S", help="first seed (default 0)")
    p.add_argument("--workers", type=positive_int, metavar="N", help="processes (default: this machine's cores)")
    p.add_argument("--evaluations", type=non_negative_int, default=DEFAULT_EVALUATIONS, metavar="N",
                   help=f"most objective evaluations (default {DEFAULT_EVALUATIONS}); 0 only evaluates")  # fmt: skip
    p.add_argument("--write", type=Path, metavar="FILE.toml",
                   help="write the fitted profile here (usable as `mkbsim run --profiles FILE.toml`)")  # fmt: skip
    p.set_defaults(handler=_calibrate)


def _calibrate(args: argparse.Namespace) -> int:
    from mkbsim.campaigns import default_workers
    from mkbsim.simulator import SeedPool, evaluate, get_profile, load_target, select_problems

    target = load_target(args.target)
    profile = get_profile(args.profile or target.profile)
    problems = tuple(select_problems(args.problems))
    if args.write is not None and args.write.is_dir():
        raise UserError(f"--write {args.write}: is a directory")
    seeds = tuple(range(args.seed, args.seed + args.seeds))
    workers = min(args.workers or default_workers(), len(seeds))
    print(f"calibrating {profile.name} against {args.target} on {len(problems)} problems × {args.replicates} "
          f"replicate(s), seeds {seeds[0]}..{seeds[-1]}, {workers} worker(s)")  # fmt: skip
    with SeedPool(workers) as pool:
        if args.evaluations == 0:
            ev = evaluate(profile, problems, seeds, pool, replicates=args.replicates)
            _print_tables(target, {"achieved": ev})
            print(f"objective {target.objective(ev):.2f} (squared misses of the means in tolerances, plus statements "
                  "short of holding with margin)")  # fmt: skip
            return 0
        result = _fit_with_progress(target, profile, problems, seeds, pool, args)
    _print_tables(target, {"before": result.evaluation_before, "after": result.evaluation_after})
    print(f"objective {result.objective_before:.2f} → {result.objective_after:.2f} after {result.evaluations} "
          "evaluations (squared misses of the means in tolerances, plus statements short of holding with margin)")
    changed = {n: (getattr(result.before, n), getattr(result.after, n)) for n in target.fit}
    print("fitted: " + ", ".join(f"{n} {a:.3g} → {b:.3g}" for n, (a, b) in changed.items()))
    if args.write is not None:
        try:
            args.write.write_text(result.after.to_toml())
        except OSError as exc:
            raise UserError(f"--write {args.write}: {exc.strerror or exc}") from None
        print(f"wrote {args.write} (mkbsim run --profiles {args.write})")
    return 0


def _fit_with_progress(target: Target, profile: AgentProfile, problems: tuple[str, ...], seeds: tuple[int, ...],
                       pool: SeedPool, args: argparse.Namespace) -> FitResult:  # fmt: skip
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from mkbsim.progress import stderr_console
    from mkbsim.simulator import fit

    columns = (
        TextColumn("fitting"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("best objective {task.fields[best]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, transient=True, console=stderr_console()) as bar:  # stdout: only the result
        task = bar.add_task("fit", total=args.evaluations, best="-")

        def show(n: int, best: float) -> None:
            bar.update(task, completed=min(n, args.evaluations), best=f"{best:.2f}")

        return fit(target, profile, problems, seeds, pool, replicates=args.replicates,
                   max_evaluations=args.evaluations, on_evaluation=show)  # fmt: skip


def _print_tables(target: Target, columns: dict[str, Evaluation]) -> None:
    from rich.console import Console
    from rich.table import Table

    last = list(columns.values())[-1]
    seeds = len(last.seeds)
    table = Table(title=f"{target.profile} ({target.study_model}): target vs mean ± SD over {seeds} seeds",
                  title_justify="left")  # fmt: skip
    for name, justify in (("statistic", "left"), ("basis", "left"), ("target", "right"), ("±tol", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for name in columns:
        table.add_column(name, justify="right")
    table.add_column("within")
    for stat_name, stat in target.statistics.items():
        tol = f"×/÷{2.718281828**stat.tolerance:.2f}" if stat.log_scale else f"{stat.tolerance:.3g}"
        values = [_mean_sd(ev, stat_name) for ev in columns.values()]
        miss = stat.miss(last.mean(stat_name))
        within = "yes" if abs(miss) <= 1 else ("n/a" if miss != miss else "no")
        table.add_row(stat_name, "study" if stat.stated else "assumed", _fmt(stat.value), tol, *values, within)
    console = Console() if sys.stdout.isatty() else Console(width=160)  # piped: whole statistic names, no wrapping
    console.print(table)
    if target.statements:
        shares = Table(title="statements: share of seeds they hold at", title_justify="left")
        shares.add_column("statement")
        shares.add_column("basis")
        for name in columns:
            shares.add_column(name, justify="right")
        for s in target.statements:
            shares.add_row(s.text, "study" if s.basis == "stated" else "assumed",
                           *(f"{ev.share(s):.0%}" for ev in columns.values()))  # fmt: skip
        console.print(shares)
    stated = [(n, s.note) for n, s in target.statistics.items() if s.stated]
    stated += [(s.text, s.note) for s in target.statements if s.basis == "stated"]
    if stated:
        print("study: the summary's sentences behind the stated targets (the rest are assumptions):")
        for name, note in stated:
            print(f"  {name}: “{note}”")
    sys.stdout.flush()


def _mean_sd(ev: Evaluation, name: str) -> str:
    mean, sd = ev.mean(name), ev.sd(name)
    if mean is None:
        return "-"
    return _fmt(mean) if sd is None else f"{_fmt(mean)} ± {sd:.3f}"


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
