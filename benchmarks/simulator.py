"""Simulator benchmark: the full default campaign (six profiles × 74 problems × 4 arms), side by side
with the store's raw batched append rate on the very same events.

Phases: deriving the design spaces (catalogue load, imports torch), simulating without a store,
running the campaign into a fresh store (what `mkbsim run` does before its report: the campaign lifecycle on
the local process pool), raw sqlite `executemany` of the same events (benchmarks/store.py's floor), and
`mkbsim run` end to end in a fresh process, without and with the three control arms (`--controls
aa,placebo,matched`; target: at most 1.8× the default campaign), each the median of `--cli-repeats` runs.

    .venv/bin/python benchmarks/simulator.py [--replicates 1] [--skip-cli] [--cli-repeats 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from mkbsim.campaigns import SimCampaign, run_campaign
from mkbsim.events import EventStore, NewEvent
from mkbsim.simulator import CampaignConfig, all_design_spaces, shipped_profiles, simulate


def _store_bench() -> object:
    """benchmarks/store.py as a module (it is a script, not a package member)."""
    spec = importlib.util.spec_from_file_location("store_bench", Path(__file__).with_name("store.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicates", type=int, default=1)
    ap.add_argument("--skip-cli", action="store_true", help="skip the end-to-end `mkbsim run` in a fresh process")
    ap.add_argument("--cli-repeats", type=int, default=3, help="end-to-end runs of each kind (default 3)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mkbsim-simbench-"))
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    print(f"mkbsim simulator benchmark — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, {machine}, "
          f"Python {platform.python_version()}")  # fmt: skip

    t0 = time.perf_counter()
    spaces = all_design_spaces()
    t_load = time.perf_counter() - t0
    config = CampaignConfig(tuple(shipped_profiles().values()), tuple(spaces), args.replicates, seed=0)
    attempts = len(config.profiles) * len(config.problems) * args.replicates * 4
    print(f"\ndesign spaces of {len(spaces)} problems (catalogue load, torch import): {t_load:.2f} s")

    t0 = time.perf_counter()
    events: list[NewEvent] = [ev for _, outcome in simulate(config) for ev in outcome.events]
    t_sim = time.perf_counter() - t0
    print(f"simulation only ({attempts:,} attempts, {len(events):,} events): {t_sim:.2f} s = "
          f"{attempts / t_sim:,.0f} attempts/s, {len(events) / t_sim:,.0f} events/s")  # fmt: skip

    with EventStore(tmp / "campaign.sqlite", create=True) as store:
        t0 = time.perf_counter()
        summary = run_campaign(store, SimCampaign(config))
        t_run = time.perf_counter() - t0
    campaign_rate = summary.events / t_run
    print(f"campaign into the store ({summary.events:,} events, batches of at most 5000, process pool): {t_run:.2f} s "
          f"= {summary.attempts / t_run:,.0f} attempts/s, {campaign_rate:,.0f} events/s")  # fmt: skip

    t_raw = _store_bench().bench_raw(tmp / "raw.sqlite", events, 1000)  # type: ignore[attr-defined]
    raw_rate = len(events) / t_raw
    print(f"raw sqlite executemany of the same events (batches of 1000): {raw_rate:,.0f} events/s")
    print(f"campaign events/s ÷ raw append events/s = {campaign_rate / raw_rate:.2f}")

    if not args.skip_cli:
        # wall seconds, and CPU seconds of the process and its pool workers (what a busy shared machine distorts least)
        walls: dict[str, list[float]] = {"default": [], "controls": []}
        cpus: dict[str, list[float]] = {"default": [], "controls": []}
        for i in range(args.cli_repeats):  # alternated, so that a change in the machine's load hits both alike
            for kind, extra in (("default", []), ("controls", ["--controls", "aa,placebo,matched"])):
                store_path = tmp / f"cli-{kind}-{i}.sqlite"
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                proc = subprocess.run([sys.executable, "-m", "mkbsim", "run", "--store", str(store_path), *extra],
                                      capture_output=True, text=True, check=True)  # fmt: skip
                walls[kind].append(time.perf_counter() - t0)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpus[kind].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        lines = len(proc.stdout.splitlines())
        for kind, title in (("default", "`mkbsim run` (defaults, fresh process, progress bar and report)"),
                            ("controls", f"`mkbsim run --controls aa,placebo,matched` ({lines}-line output)")):
            print(f"{title}, median of {args.cli_repeats}: {statistics.median(walls[kind]):.1f} s wall (runs "
                  f"{', '.join(f'{w:.1f}' for w in walls[kind])}), {statistics.median(cpus[kind]):.1f} CPU s (runs "
                  f"{', '.join(f'{c:.1f}' for c in cpus[kind])})")  # fmt: skip
        wall, cpu = (statistics.median(a / b for a, b in zip(m["controls"], m["default"], strict=True))
                     for m in (walls, cpus))  # fmt: skip
        print(f"controls ÷ default, median of the paired runs: {wall:.2f}× wall, {cpu:.2f}× CPU (target ≤ 1.8×); "
              f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip

if __name__ == "__main__":
    main()
