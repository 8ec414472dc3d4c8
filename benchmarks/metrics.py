"""Metrics benchmark: build every analysis projection from a 1,000,000-event campaign store, then time
`mkbsim report` on it once the projections are current, the slow sections and `mkbsim power`, and the
metrics functions' own CPU time apart from the store's reads.

Targets: building ≤ 10 s; the report ≤ 1 s (wall clock of the whole command, interpreter start and the
store's integrity check included); `report --section model`, `--section robustness` and `mkbsim power`
≤ 30 s each, with progress on stderr.

    .venv/bin/python benchmarks/metrics.py [--events 1000000] [--keep PATH]
    .venv/bin/python benchmarks/metrics.py --reuse PATH   # a store this benchmark built (--keep) before
    .venv/bin/python benchmarks/metrics.py --reuse PATH --before DIR [--runs 7] [--report-args ARGS]
                                           [--bytecode uncached|cached|both] [--before-store COPY]
        # only `mkbsim report [ARGS]`, alternated between another source tree DIR (e.g. main, from
        # `git archive`) and this one: CPU (user + sys of the whole process), wall and peak memory of each,
        # with mkbsim compiled on every run and/or from cached bytecode, and whether their JSON reports
        # are byte-identical
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import platform
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from mkbsim.events import EventStore, NewEvent, new_event_ids
from mkbsim.events._schema import current_version
from mkbsim.lab import ReportData
from mkbsim.projections import ProjectionEngine, default_projections

MODELS = ("gpt-5.6-sol", "gemini-3.7-flash", "deepseek-v4-pro", "glm-5.3", "glm-5.3-flash", "qwen3.8-flash")
FAMILIES = {"attention": 18, "kv_cache": 8, "linear_attention": 13, "mlp_norm": 17, "moe": 8, "quantization": 10}
ARMS = (("solo_cutedsl", "cutedsl"), ("solo_tirx", "tirx"), ("cutedsl2tirx_skill", "tirx"),
        ("tirx2cutedsl_skill", "cutedsl"))  # fmt: skip
STEPS = 12  # agent steps per attempt
SUBMISSIONS = 4  # submissions (each with its verifier result) per attempt
CONCURRENT = 32  # attempts whose events interleave, as a campaign's workers do


def attempt_events(rng: random.Random, aid: str, where: dict[str, object], arm: str, dsl: str,
                   source: str | None) -> list[tuple[str, dict[str, object]]]:  # fmt: skip
    """One attempt shaped like a real one: start, skill read, steps, submissions, final verdict, skill, finish."""
    events: list[tuple[str, dict[str, object]]] = [("AttemptStarted", {
        "attempt_id": aid, **where, "dsl": dsl, "arm": arm, "budget": {"minutes": 40, "submissions": 10},
        "source_attempt_id": source, "chain_id": None, "hop": None, "filter": None,
    })]  # fmt: skip
    if source is not None:
        events.append(("SkillRead", {"attempt_id": aid, "source_attempt_id": source, "text": "skill " * 60,
                                     "sha256": "ab" * 32, "filter": None}))  # fmt: skip
    passed = rng.random() < 0.8
    runtime = rng.lognormvariate(-1.0, 0.8)
    for i in range(STEPS):
        step = {"attempt_id": aid, "step": i, "kind": "command", "content": "python bench.py --n 4096 " * 3,
                "elapsed_s": 12.5 * i}  # fmt: skip
        events.append(("AgentStep", step))
        if i % 3 == 2:
            k = i // 3
            ok = passed and rng.random() < 0.7
            events.append(("SubmissionMade", {"attempt_id": aid, "submission": k, "counted": True,
                                              "code_sha256": "cd" * 32, "code": ""}))  # fmt: skip
            events.append(("VerifierResult", _verdict(aid, k, ok, runtime * (1 + 0.1 * (SUBMISSIONS - k)))))
    events.append(("VerifierResult", _verdict(aid, "final", passed, runtime)))
    events.append(("SkillWritten", {"attempt_id": aid, "text": "finding " * 80, "sha256": "ef" * 32}))
    events.append(("AttemptFinished", {"attempt_id": aid, "status": "finished", "passed": passed,
                                       "runtime_ms": runtime if passed else None,
                                       "speedup": 1.0 / runtime if passed else None, "skipped": False,
                                       "reason": None}))  # fmt: skip
    return events


def _verdict(aid: str, submission: int | str, passed: bool, runtime: float) -> dict[str, object]:
    return {
        "attempt_id": aid, "submission": submission, "backend": "analytic", "protocol": "paper", "passed": passed,
        "correct": passed, "runtime_ms": runtime if passed else None, "eager_ms": 1.0,
        "speedup": 1.0 / runtime if passed else None, "bypass_ok": True, "forbidden": [], "inline_cuda": False,
        "failure": None if passed else "wrong_output", "details": {}, "env": {"backend": "analytic"},
    }  # fmt: skip


def campaign(rng: random.Random, n_events: int) -> Iterator[tuple[str, str, dict[str, object]]]:
    """(stream, type, payload) of a campaign, CONCURRENT attempts interleaved, about ``n_events`` long."""
    problems = [(f"p{i + 1:02d}", fam) for i, fam in enumerate(f for f, n in FAMILIES.items() for _ in range(n))]
    ids = iter(new_event_ids(n_events // 10 + 1000))

    def attempts() -> Iterator[list[tuple[str, str, dict[str, object]]]]:
        replicate = 0
        while True:
            for model in MODELS:
                for problem, family in problems:
                    where = {"campaign_id": "bench", "model": model, "problem": problem, "family": family,
                             "replicate": replicate}  # fmt: skip
                    solos: dict[str, str] = {}
                    for arm, dsl in ARMS:
                        aid = next(ids)
                        source = solos.get("solo_" + arm.split("2")[0]) if arm.endswith("_skill") else None
                        solos[arm] = aid
                        yield [(f"attempt-{aid}", t, p) for t, p in attempt_events(rng, aid, where, arm, dsl, source)]
            replicate += 1

    running: list[list[tuple[str, str, dict[str, object]]]] = []
    source = attempts()
    emitted = 0
    while emitted < n_events:
        while len(running) < CONCURRENT:
            running.append(next(source))
        k = rng.randrange(len(running))
        yield running[k].pop(0)
        emitted += 1
        if not running[k]:
            running.pop(k)


def fill(path: Path, n_events: int) -> float:
    """Write the campaign with executemany straight into the store's table (valid positions, versions)."""
    EventStore(path, create=True).close()
    conn = sqlite3.connect(path, isolation_level=None)
    encode = json.JSONEncoder(separators=(",", ":")).encode
    versions: dict[str, int] = {}
    now = datetime.now(UTC).isoformat(timespec="microseconds")
    t0 = time.perf_counter()
    batch: list[tuple[object, ...]] = []
    events = campaign(random.Random(0), n_events)
    for (stream, type_, payload), event_id in zip(events, new_event_ids(n_events), strict=True):
        version = versions[stream] = versions.get(stream, 0) + 1
        batch.append((event_id, stream, version, type_, current_version(type_), now, encode(payload)))
        if len(batch) == 20_000:
            _insert(conn, batch)
            batch = []
    _insert(conn, batch)
    conn.close()
    return time.perf_counter() - t0


def _insert(conn: sqlite3.Connection, rows: list[tuple[object, ...]]) -> None:
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO events (event_id, stream_id, version, type, schema_version, recorded_at, payload)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    conn.execute("COMMIT")


def timed_command(path: Path, command: str, *extra: str, source: Path | None = None,
                  stdout: int | None = subprocess.DEVNULL,
                  bytecode: Path | None = None) -> tuple[float, float, list[str], int]:  # fmt: skip
    """(wall, CPU seconds, stderr lines, max RSS in KB) of one whole `mkbsim COMMAND` run (of the mkbsim
    in ``source`` when given, else this one). ``bytecode``: a folder of cached bytecode (written by a
    first run, read by later ones) instead of the environment's (see ``bytecode_modes``)."""
    # run from the source tree: `python -m` puts the working directory first on the path
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source.resolve())
    if bytecode is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env["PYTHONPYCACHEPREFIX"] = str(bytecode)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryFile(mode="w+") as err:
        t0 = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "mkbsim", command, "--store", str(path.resolve()), *extra],
                                 stdout=stdout, stderr=err, env=env, cwd=source)  # fmt: skip
        _, status, usage = os.wait4(child.pid, 0)  # this child's own CPU time and peak memory
        wall = time.perf_counter() - t0
        child.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        lines = err.read().splitlines()
    if child.returncode != 0:
        sys.exit(f"mkbsim {command} failed ({child.returncode}): {lines[-1:] or ''}")
    return wall, usage.ru_utime + usage.ru_stime, lines, usage.ru_maxrss


def metrics_cpu(path: Path) -> None:
    """CPU seconds of reading the records through the read model (the store's part) and of each metrics
    function on them (this package's part), in this process, without the integrity check."""
    from mkbsim.lab import Lab
    from mkbsim.metrics import _controls, _model, _power, _robustness, _sections

    def cpu(step: Callable[[], object]) -> tuple[float, object]:
        c0 = time.process_time()
        out = step()
        return time.process_time() - c0, out

    with Lab(path, catch_up=False) as lab:
        read, data = cpu(lambda: lab.transfer.report_data(None))
        read_verdicts, verdicts = cpu(lambda: lab.transfer.verdict_records(None))
        check = cpu(lab.store.verify_pages)[0]
    assert isinstance(data, ReportData) and isinstance(verdicts, list)
    c, s = data.comparisons, data.solos
    print(f"\nCPU seconds in this process (load average {_load()}); the store's reads, then the metrics:")
    print(f"  read comparisons, solos, controls ({len(c):,} + {len(s):,})  {read:6.2f} s")
    print(f"  read verdict records ({len(verdicts):,})                {read_verdicts:6.2f} s")
    print(f"  the store's integrity check (every command runs it)  {check:6.2f} s")
    steps: list[tuple[str, Callable[[], object]]] = [
        ("groups (model × direction × family)", lambda: _sections.groups(c, _sections.DEFAULT_BY)),
        ("solo", lambda: _sections.solo(s, _sections.DEFAULT_BY)),
        ("standing", lambda: _sections.standing(c)),
        ("standing_gradient", lambda: _sections.standing_gradient(c)),
        ("sensitivity", lambda: _sections.sensitivity(c)),
        ("asymmetry", lambda: _sections.asymmetry(c)),
        ("controls", lambda: _controls.control_rows(c, data.controls)),
    ]
    total = 0.0
    for name, step in steps:
        took = cpu(step)[0]
        total += took
        print(f"  {name:<46} {took:6.2f} s")
    print(f"  {'default sections, all':<46} {total:6.2f} s")
    for name, step in (("model (MixedLM + flip logits)", lambda: _model.mixed_models(verdicts)),
                       ("robustness (8 variants)", lambda: _robustness.robustness(verdicts))):  # fmt: skip
        print(f"  {name:<46} {cpu(step)[0]:6.2f} s")
    cells: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for r in c:
        cells.setdefault((r.model, r.direction), []).append((math.log(r.r), r.problem))
    spreads = [_power.spread(m, d, [v for v, _ in xs], [p for _, p in xs], None)
               for (m, d), xs in sorted(cells.items())]  # fmt: skip
    took = cpu(lambda: _power.power_report(spreads, 0.10, simulations=2000))[0]
    print(f"  {'power (' + str(len(spreads)) + ' cells, 2000 simulations)':<46} {took:6.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--keep", type=Path, help="write the store here (kept) instead of a temporary directory")
    where.add_argument("--reuse", type=Path, help="time the reports on this store (built by --keep before)")
    ap.add_argument(
        "--before",
        type=Path,
        metavar="DIR",
        help="with --reuse: time only `mkbsim report`, alternating the mkbsim in DIR and this one",
    )
    ap.add_argument("--runs", type=int, default=7, help="with --before: runs of each (default 7)")
    ap.add_argument("--before-store", type=Path, metavar="PATH",
                    help="with --before: a copy of the store for DIR's mkbsim, when its projections are of another "
                    "version than this tree's (on one store each run would rebuild them in turn)")  # fmt: skip
    ap.add_argument("--bytecode", choices=("uncached", "cached", "both"), default="both",
                    help="with --before: time with mkbsim compiled from source on every run (as this environment "
                    "runs it: PYTHONDONTWRITEBYTECODE=1), with cached bytecode (as an installed package runs), or "
                    "both (default)")  # fmt: skip
    ap.add_argument(
        "--report-args",
        default="",
        metavar="ARGS",
        help="with --before: arguments of the timed report, e.g. '--section skills --similarity minilm'",
    )
    args = ap.parse_args()
    print(f"mkbsim metrics benchmark — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
          f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"SQLite {sqlite3.sqlite_version}")  # fmt: skip
    if args.reuse is not None:
        if not args.reuse.is_file():
            sys.exit(f"{args.reuse}: no such store")
        path = args.reuse
        if args.before is not None:
            side_by_side(path, args.before, args.runs, args.report_args.split(), args.bytecode, args.before_store)
            return
    else:
        path = args.keep or Path(tempfile.mkdtemp(prefix="mkbsim-metrics-")) / "campaign.sqlite"
        if path.exists():
            sys.exit(f"{path}: exists; choose another --keep path")
        build(path, args.events)
    report_commands(path)
    metrics_cpu(path)
    if args.reuse is None:  # it appends events, so a reused store is left as it was
        catch_up(path)


def build(path: Path, n_events: int) -> None:
    """Fill the store and build every projection from scratch, timed."""
    seconds = fill(path, n_events)
    store = EventStore(path)
    counts = store.type_counts()
    attempts = counts.get("AttemptStarted", 0)
    print(f"\nsynthesised {store.count():,} events ({attempts:,} attempts, {len(MODELS)} models × 74 problems × "
          f"4 arms × replicates) in {seconds:.1f} s")  # fmt: skip

    engine = ProjectionEngine(store, default_projections())
    total = total_cpu = 0.0
    print(f"\nbuilding the projections from scratch (load average {_load()}):")
    for name, projection in engine.projections.items():
        t0, c0 = time.perf_counter(), time.process_time()
        applied = engine.rebuild(name)
        took, cpu = time.perf_counter() - t0, time.process_time() - c0
        total, total_cpu = total + took, total_cpu + cpu
        handled = sum(counts.get(t, 0) for t in projection.handles)
        print(f"  {name:<14} {took:6.2f} s wall, {cpu:5.2f} s CPU  ({applied:,} of its {handled:,} handled events "
              f"read; {store.count() / took:,.0f} store events/s)")  # fmt: skip
    comparisons = store.connection.execute("SELECT COUNT(*), SUM(resolved) FROM comparisons").fetchone()
    print(f"  all            {total:6.2f} s wall, {total_cpu:5.2f} s CPU  (target ≤ 10 s) → {comparisons[0]:,} "
          f"comparisons, {comparisons[1]:,} resolved")  # fmt: skip
    store.close()


def report_commands(path: Path) -> None:
    print(f"\n`mkbsim report` with projections current (whole command, 5 runs; load average {_load()}):")
    for label, extra in (("table", ()), ("json", ("--format", "json"))):
        runs = [timed_command(path, "report", *extra) for _ in range(5)]
        walls, cpus = [r[0] for r in runs], [r[1] for r in runs]
        print(f"  {label:<6} median {statistics.median(walls):.2f} s wall (max {max(walls):.2f}), "
              f"{statistics.median(cpus):.2f} s CPU  (target ≤ 1 s)")  # fmt: skip
    print(f"\nslow sections, whole command, once each (load average {_load()}):")
    for label, command, extra in (("report --section model", "report", ("--section", "model")),
                                  ("report --section robustness", "report", ("--section", "robustness")),
                                  ("power", "power", ())):  # fmt: skip
        wall, cpu, progress, _ = timed_command(path, command, *extra)
        print(f"  {label:<28} {wall:6.2f} s wall, {cpu:6.2f} s CPU, {len(progress)} progress lines on stderr "
              f"(target ≤ 30 s)")  # fmt: skip


def side_by_side(path: Path, before: Path, runs: int, extra: Sequence[str], bytecode: str,
                 before_store: Path | None = None) -> None:  # fmt: skip
    """`mkbsim report EXTRA` of ``before``'s mkbsim and this one, alternated run by run so both see the same
    load, with and/or without cached bytecode (``bytecode_modes``); then whether their `--format json`
    outputs are byte-identical. ``before_store``: a copy of the store for ``before`` (where the two trees'
    projections differ in version, one store would be rebuilt by each run in turn)."""
    stores = {"before": before_store or path, "after": path}
    if not (before / "mkbsim" / "__init__.py").is_file():
        sys.exit(f"{before}: no mkbsim source tree (expected {before}/mkbsim/__init__.py)")
    stale = [tree for tree in (before, Path(__file__).parent.parent) if next((tree / "mkbsim").rglob("*.pyc"), None)]
    if bytecode != "cached" and stale:
        sys.exit(f"{', '.join(map(str, stale))}: holds cached bytecode under mkbsim/ (remove it to time compiling)")
    what = " ".join(["mkbsim report", *extra])
    on = str(path) if before_store is None else f"{before_store} (before) and {path} (after)"
    print(f"\n`{what}` on {on}, {runs} runs each, alternated (load average {_load()}); CPU = user + sys of the "
          "whole process:")  # fmt: skip
    for label, source in (("before", before), ("after", None)):  # projections brought current, untimed
        timed_command(stores[label], "report", *extra, source=source)
    with tempfile.TemporaryDirectory(prefix="mkbsim-bytecode-") as caches:
        variants = [(f"{label} {mode}", stores[label], source, cache)
                    for mode, folder in bytecode_modes(bytecode, Path(caches))
                    for label, source in (("before", before), ("after", None))
                    for cache in [None if folder is None else folder / label]]  # fmt: skip
        for _, store, source, cache in variants:
            if cache is not None:  # the first run writes the bytecode every later run reads
                timed_command(store, "report", *extra, source=source, bytecode=cache)
        times: dict[str, list[tuple[float, float, int]]] = {label: [] for label, *_ in variants}
        for _ in range(runs):
            for label, store, source, cache in variants:
                wall, cpu, _, rss = timed_command(store, "report", *extra, source=source, bytecode=cache)
                times[label].append((wall, cpu, rss))
    for label, runs_of in times.items():
        walls, cpus = sorted(r[0] for r in runs_of), sorted(r[1] for r in runs_of)
        peak = max(r[2] for r in runs_of) / 1024
        print(f"  {label:<16} CPU median {statistics.median(cpus):.2f} s [{cpus[0]:.2f}–{cpus[-1]:.2f}], wall median "
              f"{statistics.median(walls):.2f} s [{walls[0]:.2f}–{walls[-1]:.2f}], max RSS {peak:.0f} MB")  # fmt: skip
    print(f"  (load average {_load()} at the end)")
    outputs = []
    for label, source in (("before", before), ("after", None)):
        with tempfile.TemporaryFile() as out:
            timed_command(stores[label], "report", *extra, "--format", "json", source=source, stdout=out.fileno())
            out.seek(0)
            outputs.append(out.read())
    print(
        f"  JSON reports byte-identical: {'yes' if outputs[0] == outputs[1] else 'NO'} "
        f"({len(outputs[0]):,} bytes before, {len(outputs[1]):,} after)"
    )
    if outputs[0] != outputs[1]:
        changed = collections.Counter(_differences(json.loads(outputs[0]), json.loads(outputs[1]), ""))
        print(
            "  values that differ (list positions as []):", ", ".join(f"{k} ×{n}" for k, n in sorted(changed.items()))
        )


def bytecode_modes(bytecode: str, caches: Path) -> list[tuple[str, Path | None]]:
    """How the timed commands get mkbsim's bytecode: "uncached" as this environment runs them
    (PYTHONDONTWRITEBYTECODE=1: every run compiles the mkbsim modules it imports from source), "cached"
    as an installed package or any environment without that variable runs them (every module's bytecode
    read from a cache folder a first run wrote)."""
    modes = ("uncached", "cached") if bytecode == "both" else (bytecode,)
    return [(mode, caches if mode == "cached" else None) for mode in modes]


def _differences(a: object, b: object, where: str) -> Iterator[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in a.keys() | b.keys():
            yield from _differences(a.get(key), b.get(key), f"{where}.{key}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for x, y in zip(a, b, strict=True):
            yield from _differences(x, y, f"{where}[]")
    elif a != b:
        yield where


def catch_up(path: Path) -> None:
    """Median and max time to bring every projection current after one more attempt's events (20 appended)."""
    store = EventStore(path)
    engine = ProjectionEngine(store, default_projections())
    latencies = []
    rng = random.Random(1)
    for i in range(20):
        aid = new_event_ids(1)[0]
        where = {"campaign_id": "bench", "model": MODELS[0], "problem": "p01", "family": "attention",
                 "replicate": 10_000 + i}  # fmt: skip
        store.append([NewEvent(f"attempt-{aid}", t, p) for t, p in attempt_events(rng, aid, where, "solo_tirx",
                                                                                    "tirx", None)])  # fmt: skip
        t0 = time.perf_counter()
        engine.catch_up()
        latencies.append(time.perf_counter() - t0)
    print(f"\nincremental catch-up of all projections after one attempt's events: median "
          f"{statistics.median(latencies) * 1e3:.1f} ms, max {max(latencies) * 1e3:.1f} ms")  # fmt: skip
    store.close()


def _load() -> str:
    """The 1-minute load average: other work on the machine stretches wall-clock figures."""
    return f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"


if __name__ == "__main__":
    main()
