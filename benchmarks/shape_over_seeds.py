"""The study's shape over seeds: the default campaign of `mkbsim run` (the shipped profiles × 74 problems × 4
arms) simulated in memory at seeds 0..K-1, and for every qualitative statement of the study
(``mkbsim.simulator._shape.STATEMENTS``) the share of seeds at which it holds — misses included — plus each
model's headline statistics as mean ± seed-to-seed standard deviation, and every statement seed by seed (the value
it turns on, ✓ where it holds), with the harm range over the model × direction cells and GLM-5.3-Flash's lifts.

    .venv/bin/python benchmarks/shape_over_seeds.py [--seeds 10] [--workers N] [--profiles FILE.toml,...]

The issue's bar: the four shape statements (``SHAPE``) hold for at least 80% of seeds.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime

from mkbsim.campaigns import default_workers
from mkbsim.simulator import resolve_profiles, select_problems
from mkbsim.simulator._seeds import SeedPool, SeedResult
from mkbsim.simulator._shape import GLM_FLASH, SHAPE, STATEMENTS

HEADLINE = ("solo_pass_rate.cutedsl", "solo_pass_rate.tirx", "speedup_geomean.cutedsl", "speedup_geomean.tirx",
            "paired_lift.cutedsl2tirx", "paired_lift.tirx2cutedsl", "harm_rate.cutedsl2tirx",
            "harm_rate.tirx2cutedsl", "help_rate.cutedsl2tirx", "help_rate.tirx2cutedsl")  # fmt: skip
BAR = 0.8


def shares(results: list[SeedResult]) -> dict[str, tuple[int, int, list[float]]]:
    """Statement key -> (seeds it holds at, seeds it applies to, its values)."""
    out: dict[str, tuple[int, int, list[float]]] = {}
    for s in STATEMENTS:
        verdicts = [v for r in results for v in r.verdicts if v.key == s.key and v.holds is not None]
        values = [v.value for v in verdicts if v.value is not None]
        out[s.key] = (sum(bool(v.holds) for v in verdicts), len(verdicts), values)
    return out


def _fmt(values: list[float]) -> str:
    if not values:
        return "–"
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{mean:+.3f} ± {sd:.3f}" if abs(mean) < 10 else f"{mean:.1f} ± {sd:.1f}"


def _value(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:.0f}" if float(v).is_integer() else f"{v:+.2f}" if abs(v) < 10 else f"{v:.1f}"


def per_seed_rows(results: list[SeedResult], study_model: dict[str, str]) -> list[tuple[str, list[str]]]:
    """One row per statement (its value at each seed, ✓ where it holds), then the harm range over the model ×
    direction cells and GLM-5.3-Flash's paired lifts."""
    rows = []
    for s in STATEMENTS:
        verdicts = [next(v for v in r.verdicts if v.key == s.key) for r in results]
        rows.append((s.key, [f"{_value(v.value)}{' ✓' if v.holds else ''}" if v.holds is not None else "n/a"
                             for v in verdicts]))  # fmt: skip
    harm = [[v for st in r.stats.values() for k, v in st.items() if k.startswith("harm_rate.") and v is not None]
            for r in results]  # fmt: skip
    rows.append(("harm range over cells", [f"{min(h):.0%}–{max(h):.0%}" if h else "–" for h in harm]))
    flash = [p for p, m in study_model.items() if m == GLM_FLASH]
    for name in [f"{p}: paired_lift.{d}" for p in flash for d in ("cutedsl2tirx", "tirx2cutedsl")]:
        profile, stat = name.split(": ")
        rows.append((name, [_value(r.stats[profile].get(stat)) for r in results]))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=10, help="seeds 0..K-1 (default 10)")
    ap.add_argument("--workers", type=int, default=default_workers(), help="processes (default: all cores)")
    ap.add_argument("--profiles", help="profile names or FILE.toml, comma-separated (default: the shipped six)")
    args = ap.parse_args()
    profiles = resolve_profiles(args.profiles.split(",") if args.profiles else None)
    problems = tuple(select_problems(None))
    print(f"shape over seeds — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}; {len(profiles)} profiles × {len(problems)} problems × 4 arms, seeds "
          f"0..{args.seeds - 1}, {args.workers} workers")  # fmt: skip
    t0 = time.perf_counter()
    with SeedPool(args.workers) as pool:
        results = pool.run(profiles, problems, range(args.seeds))
    print(f"{args.seeds} campaigns in {time.perf_counter() - t0:.1f} s\n", file=sys.stderr)

    print("| statement | study | share of seeds | value: mean ± sd |")
    print("|---|---|---|---|")
    for s in STATEMENTS:
        held, applied, values = shares(results)[s.key]
        mark = "**" if s.key in SHAPE else ""
        share = f"{held}/{applied} ({held / applied:.0%})" if applied else "n/a"
        print(f"| {mark}{s.text}{mark} | “{s.quote}” | {share} | {_fmt(values)} |")
    print("\n| profile | " + " | ".join(HEADLINE) + " |")
    print("|---|" + "---|" * len(HEADLINE))
    for p in profiles:
        cells = [_fmt([v for r in results if (v := r.stats[p.name].get(k)) is not None]) for k in HEADLINE]
        print(f"| {p.name} | " + " | ".join(cells) + " |")
    print("\n| per seed | " + " | ".join(str(r.seed) for r in results) + " |")
    print("|---|" + "---|" * len(results))
    for key, cells in per_seed_rows(results, {p.name: p.study_model for p in profiles}):
        print(f"| {key} | " + " | ".join(cells) + " |")
    missed = [k for k in SHAPE if (lambda h, a, _: a == 0 or h / a < BAR)(*shares(results)[k])]
    print(f"\nshape statements below {BAR:.0%} of seeds: {', '.join(missed) or 'none'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
