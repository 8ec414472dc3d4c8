"""TUI benchmark: drives `mkbsim tui` headless with Textual's Pilot on a store of about a million events
and prints the times the targets bound (first screen ≤ 2 s; every key on every screen ≤ 100 ms: scrolls,
replay steps, switching screens, campaigns and chains), plus the other actions a researcher repeats (sort,
filter, jump, next verdict). Keys whose reads run in worker threads are also timed until their data is shown.

    .venv/bin/python benchmarks/tui.py [--store PATH] [--events 1000000] [--first-visits 5] [--baseline DIR] [--json]

Without --store it simulates a campaign into a temporary store (the simulator, replicates until the
store holds --events events) and brings the projections current, as `mkbsim run` leaves a store. The
first screen is timed in a fresh process from its start (interpreter, imports, store check, first
query, first paint) to the monitor showing the campaign; once on a store whose projections are
current and once, with --cold, on one whose projections were never built (the watcher builds them in
the background while the screen is already up). A per-action time is a key press through its handling
and the repaint of everything it changed (pilot.pause() runs the compositor), including the SQL that
fetches newly visible rows; "CPU" is the UI thread's CPU time over that span (what the key costs, less
the waits for the other processes of a shared machine). Keys "while data loads" are pressed every 20 ms
after the previous action, while the reads it started run in threads and their results are drawn.

A screen's first visit happens once a process, so it is also timed in --first-visits fresh processes
(each: the monitor up, the other screens' modules imported, then Comparisons, Replay, Skills & Filters,
Chains in turn), giving a median and a worst case per screen. With --baseline DIR (a folder holding
another version's `tui` and `mkbsim` packages, e.g. `git archive main tui mkbsim | tar -x -C DIR`) those
processes alternate between that version and this one, so that both meet the same load of a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a script, this file's folder leads sys.path, and this file's name would shadow the `tui` package.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

SIZE = (120, 40)
T0_ENV = "MKBSIM_TUI_BENCH_T0"
EVENTS_PER_REPLICATE = 52_000  # the default simulated campaign (6 profiles × 74 problems × 4 arms) per replicate


def build_store(path: Path, events: int) -> dict[str, float]:
    from mkbsim.campaigns import SimCampaign, run_campaign
    from mkbsim.events import EventStore
    from mkbsim.projections import ProjectionEngine, default_projections
    from mkbsim.simulator import CampaignConfig, select_problems, shipped_profiles

    replicates = max(1, math.ceil(events / EVENTS_PER_REPLICATE))
    config = CampaignConfig(tuple(shipped_profiles().values()), tuple(select_problems(None)), replicates, seed=0)
    t0 = time.perf_counter()
    with EventStore(path, create=True) as store:
        run_campaign(store, SimCampaign(config))
        simulated = time.perf_counter() - t0
        t1 = time.perf_counter()
        ProjectionEngine(store, default_projections()).catch_up()
        projected = time.perf_counter() - t1
    return {"simulate_s": simulated, "project_s": projected}


def drop_projections(source: Path, target: Path) -> None:
    """A copy of ``source`` whose projections were never built (what a first open of a fresh store meets)."""
    import sqlite3

    from mkbsim.projections import default_projections

    conn = sqlite3.connect(source)
    conn.execute("VACUUM INTO ?", (str(target),))
    conn.close()
    conn = sqlite3.connect(target)
    for projection in default_projections():
        for table in projection.tables:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute("DELETE FROM projection_checkpoints")
    conn.commit()
    conn.close()


#: (screen, key) of each first visit timed in a fresh process: Enter opens the first comparison in Replay
FIRST_VISITS = (("comparisons", "2"), ("replay", "enter"), ("skills", "4"), ("chains", "5"))


async def workers_done(app: Any) -> None:
    """Until no worker runs (a worker a newer one superseded ends cancelled: that is done too)."""
    from textual.worker import WorkerCancelled

    while True:
        try:
            await app.workers.wait_for_complete()
            return
        except WorkerCancelled:
            continue


async def time_key(app: Any, pilot: Any, key: str, *, loaded: bool = False) -> tuple[float, float, float | None]:
    """Press ``key``: the wall and UI-thread CPU seconds from its dispatch to its repaint, and with ``loaded``
    the wall seconds until the reads it started in worker threads are done and drawn ("data shown"; the UI
    answers other keys meanwhile). Pilot.press would add ≥ 40 ms of idle-waiting sleeps per key, so the key
    goes to the driver as Pilot sends it, and the timed span ends when the screen has processed the
    messages it caused and the compositor has repainted."""
    from textual import events

    t0, c0 = time.perf_counter(), time.thread_time()
    app._driver.send_message(events.Key(key, key if len(key) == 1 else None))
    for _ in range(3):  # the key, then the messages its action posted (cursor moved, …)
        await pilot._wait_for_screen()
    app.screen._on_timer_update()
    wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
    shown = None
    if loaded:
        await workers_done(app)
        await pilot._wait_for_screen()
        shown = time.perf_counter() - t0
    return wall, cpu, shown


async def settle(app: Any, pilot: Any) -> None:
    """Until the store is synced, the monitor's lift is drawn and no worker runs (the screens' imports included)."""
    while not (app.store_state.synced and app.lift is not None):
        await pilot.pause(0.05)
    await workers_done(app)
    await pilot.pause()


def first_visits_child(store: Path) -> None:
    """In a fresh process: the first visit of each screen of FIRST_VISITS (wall, CPU, data shown)."""
    from tui.app import MkbsimApp

    async def run() -> dict[str, tuple[float, float, float | None]]:
        app = MkbsimApp(store)
        visits = {}
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            for screen, key in FIRST_VISITS:
                visits[screen] = await time_key(app, pilot, key, loaded=True)
                await settle(app, pilot)
        return visits

    print(json.dumps(asyncio.run(run())))


def time_first_visits(store: Path, processes: int, baseline: Path | None) -> dict[str, dict[str, list[list[float]]]]:
    """Per version ("this", and "baseline" with one), per screen: [wall, CPU, data shown] of each process's
    first visit. With a baseline, the processes alternate between the two versions."""
    versions = {"this": os.environ.get("PYTHONPATH", "")}
    if baseline is not None:
        versions = {"baseline": str(baseline.resolve()), **versions}
    found: dict[str, dict[str, list[list[float]]]] = {version: {} for version in versions}
    for n in range(processes):
        for version, pythonpath in versions.items():
            env = dict(os.environ, PYTHONPATH=pythonpath)
            out = subprocess.run([sys.executable, __file__, "--first-visits-child", str(store)], env=env, check=True,
                                 capture_output=True, text=True, timeout=600).stdout  # fmt: skip
            for screen, times in json.loads(out.strip().splitlines()[-1]).items():
                found[version].setdefault(screen, []).append(times)
            print(f"first visits: process {n + 1}/{processes} ({version}) done, load {os.getloadavg()[0]:.1f}",
                  file=sys.stderr)  # fmt: skip
    return found


def first_screen_child(store: Path) -> None:
    """In a fresh process: time from the parent's spawn to the monitor's first drawn campaign view."""
    t0 = float(os.environ[T0_ENV])
    from tui.app import MkbsimApp
    from tui.screens.monitor import MonitorScreen

    imported = time.time() - t0

    async def run() -> dict[str, float]:
        app = MkbsimApp(store)
        async with app.run_test(size=SIZE) as pilot:
            drawn = views = lift = None
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and lift is None:
                await pilot.pause(0.005)
                screen = app.screen
                now = time.time() - t0
                if drawn is None and isinstance(screen, MonitorScreen) and screen.shown_campaign is not None:
                    drawn = now
                if views is None and app.store_state.synced and not app.store_state.behind:
                    views = now
                if app.lift is not None and app.lift.rows:
                    lift = now
            return {"imports_s": imported, "first_screen_s": drawn or math.nan, "views_current_s": views or math.nan,
                    "lift_table_s": lift or math.nan}  # fmt: skip

    print(json.dumps(asyncio.run(run())))


def time_first_screen(store: Path) -> dict[str, float]:
    env = dict(os.environ, **{T0_ENV: repr(time.time())})
    out = subprocess.run([sys.executable, __file__, "--first-screen-child", str(store)], env=env, check=True,
                         capture_output=True, text=True, timeout=600).stdout  # fmt: skip
    return json.loads(out.strip().splitlines()[-1])


async def time_actions(store: Path) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per action: its wall times, and the UI thread's CPU time over each key's span (less sensitive to
    the machine's load than wall time, which on a shared 2-core machine grows with the other processes)."""
    from tui.app import MkbsimApp
    from tui.screens.chains import ChainsScreen
    from tui.screens.comparisons import ComparisonsScreen
    from tui.screens.replay import ReplayScreen
    from tui.screens.skills import SkillsScreen

    app = MkbsimApp(store)
    times: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}

    async with app.run_test(size=SIZE) as pilot:

        async def act(name: str, key: str, repeat: int = 1, *, loaded: bool = False) -> None:
            """Time ``key`` (see time_key); ``loaded``: also until the data it started reading is shown."""
            for _ in range(repeat):
                wall, thread_cpu, shown = await time_key(app, pilot, key, loaded=loaded)
                times.setdefault(name, []).append(wall)
                cpu.setdefault(name, []).append(thread_cpu)
                if shown is not None:
                    times.setdefault(f"{name}: data shown", []).append(shown)
                await pilot.pause()  # let background work (the summary line, plots) finish, untimed

        async def act_while_loading(name: str, key: str, repeat: int = 6, *, during: str = "data loads") -> None:
            """``key`` pressed every 20 ms while the work the previous action started in threads (reads, or
            the screens' imports) still runs or is drawn (the worst case a reader meets), then wait until
            it is done (untimed)."""
            for _ in range(repeat):
                await act(f"{name} (while {during})", key)
                await asyncio.sleep(0.02)
            await workers_done(app)
            await pilot.pause()

        while app.lift is None:  # the monitor is up: the app now imports the other screens in a thread
            await pilot.pause(0.01)
        await act_while_loading("monitor: next campaign", "down", during="screens import")
        await settle(app, pilot)
        await act("open comparisons screen", "2")
        await act_while_loading("comparisons: cursor down", "down")
        assert isinstance(app.screen, ComparisonsScreen)
        await act("comparisons: page down", "pagedown", repeat=60)
        await act("comparisons: cursor down", "down", repeat=100)
        await act("comparisons: page up", "pageup", repeat=30)
        await act("comparisons: jump to end", "end", repeat=3)
        await act("comparisons: jump to start", "home", repeat=3)
        for _ in range(4):
            await act("comparisons: sort by next column", "s")
            await act("comparisons: page down", "pagedown", repeat=5)
        for _ in range(3):
            await act("comparisons: toggle harmed only", "h")
            await workers_done(app)
        await act("comparisons: toggle harmed only", "h")  # harmed only stays on: open one of them
        await workers_done(app)
        await act("replay: open a harmed comparison", "enter")
        assert isinstance(app.screen, ReplayScreen)
        await act("replay: step forward", "right", repeat=120)
        await act("replay: step back", "left", repeat=60)
        await act("replay: jump to next verdict", "n", repeat=10)
        await act("replay: expand a verifier result", "x", repeat=4)
        await act("replay: other direction", "o", repeat=2)
        await act("open monitor screen", "1", loaded=True)
        await act("monitor: next campaign", "down", repeat=3, loaded=True)
        await act("open skills screen", "4")
        assert isinstance(app.screen, SkillsScreen)
        await act_while_loading("skills: cursor down", "down")
        await act("skills: cursor down", "down", repeat=30)
        await act("skills: switch campaign", "c", repeat=4, loaded=True)
        await act("skills: page down", "pagedown", repeat=10)
        await act("open chains screen", "5")
        assert isinstance(app.screen, ChainsScreen)
        await act_while_loading("chains: next chain", "down")
        await act("chains: next chain", "down", repeat=20, loaded=True)
        await act("chains: next hop", "right_square_bracket", repeat=4)
    return times, cpu


def store_size(store: Path) -> dict[str, int]:
    import sqlite3

    conn = sqlite3.connect(store)
    try:
        return {
            "events": conn.execute("SELECT MAX(position) FROM events").fetchone()[0],
            "attempts": conn.execute("SELECT COUNT(*) FROM attempts").fetchone()[0],
            "comparisons": conn.execute("SELECT COUNT(*) FROM comparisons").fetchone()[0],
            "skills": conn.execute("SELECT COUNT(*) FROM events WHERE type = 'SkillWritten'").fetchone()[0],
        }
    finally:
        conn.close()


def summarize(samples: list[float], cpu: list[float] | None) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "median_ms": statistics.median(ordered) * 1000,
        "p95_ms": ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)] * 1000,
        "max_ms": ordered[-1] * 1000,
        "ui_cpu_median_ms": statistics.median(cpu) * 1000 if cpu else math.nan,
        "ui_cpu_max_ms": max(cpu) * 1000 if cpu else math.nan,
    }


def summarize_visits(samples: list[list[float]]) -> dict[str, float]:
    """Median and worst of the first visits' wall, UI-thread CPU and data-shown times (ms)."""
    wall, cpu, shown = ([row[i] * 1000 for row in samples] for i in range(3))
    return {"n": len(samples), "median_ms": statistics.median(wall), "max_ms": max(wall),
            "ui_cpu_median_ms": statistics.median(cpu), "ui_cpu_max_ms": max(cpu),
            "shown_median_ms": statistics.median(shown), "shown_max_ms": max(shown)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, help="an existing store (default: simulate one)")
    parser.add_argument("--events", type=int, default=1_000_000, help="events to simulate (default 1,000,000)")
    parser.add_argument("--cold", action="store_true", help="also time the first screen with projections unbuilt")
    parser.add_argument("--first-visits", type=int, default=5, metavar="N",
                        help="fresh processes timing each screen's first visit (default 5; 0: none)")  # fmt: skip
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="another version's tui and mkbsim packages: first visits alternate with it")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--first-screen-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--first-visits-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_screen_child is not None:
        first_screen_child(args.first_screen_child)
        return
    if args.first_visits_child is not None:
        first_visits_child(args.first_visits_child)
        return
    if args.baseline is not None and not (args.baseline / "tui").is_dir():
        parser.error(f"--baseline {args.baseline}: no tui package there")

    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    results: dict[str, Any] = {"machine": machine, "load_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        store = args.store
        if store is None:
            store = Path(tmp) / "bench.sqlite"
            results["build"] = build_store(store, args.events)
        results["store"] = store_size(store)
        results["first_screen_warm"] = time_first_screen(store)
        if args.cold:
            cold = Path(tmp) / "cold.sqlite"
            drop_projections(store, cold)
            results["first_screen_cold"] = time_first_screen(cold)
            cold.unlink()
        times, cpu = asyncio.run(time_actions(store))
        results["actions"] = {name: summarize(s, cpu.get(name)) for name, s in times.items()}
        if args.first_visits > 0:
            visits = time_first_visits(store, args.first_visits, args.baseline)
            results["first_visits"] = {
                version: {screen: summarize_visits(samples) for screen, samples in screens.items()}
                for version, screens in visits.items()
            }
    results["load_end"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"machine: {results['machine']} · load average {results['load_start']:.1f} → {results['load_end']:.1f}")
    print("store: " + ", ".join(f"{v:,} {k}" for k, v in results["store"].items()))
    if "build" in results:
        print(f"built in {results['build']['simulate_s']:.1f} s, projections in {results['build']['project_s']:.1f} s")
    for key in ("first_screen_warm", "first_screen_cold"):
        if key in results:
            r = results[key]
            print(f"{key.replace('_', ' ')}: imports {r['imports_s']:.2f} s · first screen {r['first_screen_s']:.2f} s"
                  f" · views current {r['views_current_s']:.2f} s · lift table {r['lift_table_s']:.2f} s")  # fmt: skip
    print(f"{'action':<48} {'n':>4} {'median ms':>10} {'p95 ms':>8} {'max ms':>8} {'CPU med':>8} {'CPU max':>8}")
    for name, s in results["actions"].items():
        print(f"{name:<48} {s['n']:>4} {s['median_ms']:>10.1f} {s['p95_ms']:>8.1f} {s['max_ms']:>8.1f}"
              f" {s['ui_cpu_median_ms']:>8.1f} {s['ui_cpu_max_ms']:>8.1f}")  # fmt: skip
    for version, screens in results.get("first_visits", {}).items():
        print(f"first visits, {version:<30} {'n':>4} {'median ms':>10} {'max ms':>8} {'CPU med':>8} {'CPU max':>8}"
              f" {'shown med':>10} {'shown max':>10}")  # fmt: skip
        for screen, v in screens.items():
            print(f"  {screen:<46} {v['n']:>4} {v['median_ms']:>10.1f} {v['max_ms']:>8.1f}"
                  f" {v['ui_cpu_median_ms']:>8.1f}"
                  f" {v['ui_cpu_max_ms']:>8.1f} {v['shown_median_ms']:>10.1f} {v['shown_max_ms']:>10.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
