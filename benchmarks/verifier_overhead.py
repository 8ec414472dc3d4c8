"""Where the verifier's per-call time goes on CPU: the same tiny submission timed by a bare loop and
by the verifier's harness with its pieces switched on one at a time.

    python benchmarks/verifier_overhead.py                  # the table (p36 TIRx, SMOKE shape)
    python benchmarks/verifier_overhead.py --calls 1000 --json
    python benchmarks/verifier_overhead.py --variant guards --calls 300 --json   # one row
    python benchmarks/verifier_overhead.py --backend cuda --file examples/submissions/cuda/p36_rmsnorm_cutedsl.py \\
        --dsl cutedsl                                       # on a GPU: CUDA events, production shape

Every in-process variant runs in its own fresh process (an audit hook cannot be removed), imports
the file through the worker's own import path and times each call with the harness's `Clock`
(wall; on cuda the CUDA events of the paper protocol's window, as the timer vault records them) and the thread's
CPU time around it (immune to waiting for a busy machine's cores):

* ``bare``: one input set, calls back to back (what a plain timing loop does);
* ``fresh``: new inputs for every call (`make_inputs`), still back to back;
* ``arena-new``: new inputs in a memfd arena mapped before each call (the verifier before blocks);
* ``arena``: new inputs delivered as the worker gets them (every call's arena in one block, mapped before
  the first call);
* ``guards``: arena + everything the worker opens before it loads a submission (the guards and their
  audit hook, the DSL gate, the timer's and the provenance audit's vaults, the control page), with the audited
  events per call (``events``: each runs the guards' hook); wall = the
  call as the harness's timer vault measures it (what the verifier reports), CPU = the whole
  ``timed_call``, the vault's requests included;
* ``fresh-gap`` / ``guards-gap``: an idle gap of ``--gap-ms`` (the process sleeps) before each call,
  as the worker sleeps in `recv` while the verifier prepares the next call.

``worker`` is the real thing: `VerifierSession("cpu").verify(..., protocol="paper")` (its median of 50
timed calls) and, from the same session, the eager reference timed in the trusted worker (which has no
guards at all); ``eager`` / ``eager-gap`` time that reference in a plain process.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import json
import os
import platform
import pstats
import socket
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FILE = ROOT / "examples" / "submissions" / "p36_rmsnorm_tirx.py"
PROBLEM, DSL = "p36", "tirx"

VARIANTS = (
    "bare",
    "fresh",
    "arena-new",
    "arena",
    "guards",
    "fresh-gap",
    "fresh-spin-gap",
    "guards-gap",
    "eager",
    "eager-gap",
)


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs))


class _Events:
    """Audited events per timed call (each one runs the guards' audit hook, a Python function: an ``id()`` costs
    0.06 µs in a plain process and 0.6 µs beside the guards on this VM, a ``sys._getframe`` 0.09 and 7.7)."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self.on = False

    def tally(self, event: str, args: tuple[Any, ...]) -> None:
        if self.on:
            self.counts[event] += 1


def measure_variant(
    variant: str, calls: int, gap_ms: float, threads: int, backend: str = "cpu", profile: bool = False
) -> dict[str, Any]:
    """Run in a fresh process: time ``calls`` calls of the submission under ``variant``; ``profile``: print the
    timed calls' cProfile to stderr (started before the guards, whose audit hook refuses ``sys.setprofile`` after)."""
    sys.path.insert(0, str(ROOT))
    import torch

    torch.set_num_threads(threads)
    from mkbsim.catalog import load_catalog
    from mkbsim.verifier._arena import BlockArenas
    from mkbsim.verifier._channel import Channel
    from mkbsim.verifier._control import ControlPage
    from mkbsim.verifier._mapped import bound_steps
    from mkbsim.verifier._vault import Registry
    from mkbsim.verifier._worker import Worker

    problem = load_catalog().get(PROBLEM)
    axes = problem.smoke if backend == "cpu" else problem.workload
    device = torch.device(backend)
    out_specs = []
    for spec in problem.outputs.values():
        shape = problem.shape_of(spec, axes)
        out_specs.append(None if shape is None else (shape, getattr(torch, spec[1])))
    eager = variant.startswith("eager")
    guarded = variant.startswith("guards")
    events = _Events()

    control = ControlPage()
    setup = {
        "role": "reference" if eager else "candidate", "path": str(FILE), "dsl": DSL, "device": backend,
        "sync": "stream", "off_limits": [], "inplace": [], "sample_positions": [], "output_numels": [],
    }  # fmt: skip
    # no channel: the worker's loop over blocks is bound to one, never run here (the guards only note its socket)
    pair = socket.socketpair()
    chan = Channel(pair[0])
    worker = Worker(chan, setup, os.dup(control.take_fd()))
    if guarded:
        sys.addaudithook(events.tally)  # ahead of the guards' hook: it sees every audited event of the calls
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    if guarded:
        worker.open_vaults()  # the audit hook stays in this process: every variant runs in its own
    # The submission is imported from the harness's frame, as the worker does.
    fn = problem.reference if eager else worker.import_file().run

    def measure(args: list[Any]) -> tuple[float, float]:
        """(wall µs, CPU µs) of one call. Guarded: the call as the verifier sees it, timed by the harness's
        timer vault (its measure from the control page), and the CPU time of the whole timed_call."""
        control.begin_call(suppress=False, audit=False)
        c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
        if guarded:
            worker.timed_call(fn, args)  # type: ignore[misc]
            cpu_us = (time.thread_time_ns() - c0) / 1e3
            return control.report()["ms"] * 1e3, cpu_us
        if backend == "cpu":
            fn(*args)
            return (time.perf_counter_ns() - t0) / 1e3, (time.thread_time_ns() - c0) / 1e3
        # cuda: the paper protocol's window, as the timer vault has it (synchronise, record, call, record, synchronise)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        c0 = time.thread_time_ns()
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3, (time.thread_time_ns() - c0) / 1e3

    fixed = list(problem.make_inputs(axes, seed=1, device=backend))
    # The worker's arenas (CPU only: CUDA IPC cannot map an allocation into its own process):
    # `arena-new` maps a new one before every call (the verifier before blocks), the others map one
    # block holding every call's arena before the first call, as the worker now does.
    arena_mode = "new" if variant == "arena-new" else "block" if variant == "arena" or guarded else None
    if backend != "cpu":
        arena_mode = None
    fresh = variant not in ("bare", "eager")
    gap = gap_ms / 1e3 if variant.endswith("-gap") else 0.0
    wall: list[float] = []
    cpu: list[float] = []
    warmup = 10
    draws = [list(problem.make_inputs(axes, seed=1000 + i, device=backend)) for i in range(warmup + calls)]

    def mapped(draws: list[list[Any]]) -> list[Any]:
        block = BlockArenas(draws, out_specs, device)
        desc, fds = block.descriptor()
        map_block = bound_steps(Registry().protect, device, None)["map"]  # the worker's step, as it binds it
        arenas = map_block(desc, [os.dup(fd) for fd in fds], device)[1]
        block.release_fd()
        return arenas

    in_block = mapped(draws) if arena_mode == "block" else []
    kept: list[Any] = []
    for i in range(warmup + calls):
        args: list[Any] = draws[i] if fresh else fixed
        if arena_mode == "new":
            kept[:] = mapped([args])  # the previous arena is unmapped here, before the timed call, as before
            args = kept[0][0]  # an arena: (its arguments, its output slots)
        elif arena_mode == "block":
            args = in_block[i][0]
        if gap and variant.endswith("spin-gap"):
            t = time.perf_counter()
            while time.perf_counter() - t < gap:
                os.sched_yield()
        elif gap:
            time.sleep(gap)
        events.on = i >= warmup  # the timed calls after the warm-ups, nothing between them
        if profiler is not None and i == warmup:
            profiler.clear()
        wall_us, cpu_us = measure(args)
        events.on = False
        if i >= warmup:
            wall.append(wall_us)
            cpu.append(cpu_us)
    if profiler is not None:
        _print_profile(profiler)
    per_call = {name: round(n / calls, 2) for name, n in events.counts.most_common()} if guarded else None
    return {"variant": variant, "calls": calls, "wall_us": _median(wall), "cpu_us": _median(cpu), "events": per_call}


def _print_profile(profiler: cProfile.Profile) -> None:
    """The profile by cumulative and own time, without ``disable`` (refused beside the guards)."""
    profiler.snapshot_stats()
    for key in ("cumulative", "tottime"):
        # pstats takes the stats of anything with create_stats, and empties them: a fresh holder for each table
        holder = types.SimpleNamespace(stats=dict(profiler.stats), create_stats=lambda: None)  # type: ignore[attr-defined]
        pstats.Stats(holder, stream=sys.stderr).sort_stats(key).print_stats(30)  # type: ignore[arg-type]


def run_variant(variant: str, calls: int, gap_ms: float, threads: int, backend: str = "cpu") -> dict[str, Any]:
    """``measure_variant`` in a fresh interpreter."""
    cmd = [sys.executable, __file__, "--variant", variant, "--calls", str(calls), "--gap-ms", str(gap_ms)]
    cmd += ["--threads", str(threads), "--backend", backend, "--json"]
    cmd += ["--file", str(FILE), "--problem", PROBLEM, "--dsl", DSL]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def measure_worker(rounds: int, backend: str = "cpu") -> list[dict[str, Any]]:
    """The real worker: medians reported by verifications in one session (paper protocol)."""
    sys.path.insert(0, str(ROOT))
    from mkbsim.verifier import VerifierSession

    rows = []
    with VerifierSession(backend) as session:
        for _ in range(rounds):
            report = session.verify(str(FILE), PROBLEM, DSL, protocol="paper")
            rows.append(
                {"passed": report.passed, "runtime_us": report.runtime_ms * 1e3, "eager_us": report.eager_ms * 1e3}
            )
    return rows


def _select(file: Path, problem: str, dsl: str) -> None:
    global FILE, PROBLEM, DSL
    FILE, PROBLEM, DSL = file.resolve(), problem, dsl


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", choices=VARIANTS)
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--gap-ms", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (the verifier's default: 1)")
    ap.add_argument("--rounds", type=int, default=3, help="real verifications for the worker row")
    ap.add_argument("--backend", choices=("cpu", "cuda"), default="cpu", help="cuda: production shape, no arena rows")
    ap.add_argument("--file", type=Path, default=FILE, help="the submission (default: the p36 TIRx example)")
    ap.add_argument("--problem", default=PROBLEM)
    ap.add_argument("--dsl", default=DSL, choices=("tirx", "cutedsl"))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--profile", action="store_true", help="with --variant: the timed calls' profile on stderr")
    a = ap.parse_args()
    _select(a.file, a.problem, a.dsl)
    if a.variant:
        row = measure_variant(a.variant, a.calls, a.gap_ms, a.threads, a.backend, a.profile)
        print(json.dumps(row) if a.json else row)
        return
    variants = [v for v in VARIANTS if a.backend == "cpu" or not v.startswith("arena")]
    rows = [run_variant(v, a.calls, a.gap_ms, a.threads, a.backend) for v in variants]
    worker = measure_worker(a.rounds, a.backend)
    base = next(r for r in rows if r["variant"] == "bare")
    result = {
        "machine": f"{platform.node()} · {os.cpu_count()} cpus · load {os.getloadavg()[0]:.2f} · Python "
        f"{platform.python_version()}",
        "file": str(FILE.relative_to(ROOT)) if FILE.is_relative_to(ROOT) else str(FILE),
        "rows": rows,
        "worker": worker,
    }
    if a.json:
        print(json.dumps(result, indent=1))
        return
    print(
        f"{result['file']} ({PROBLEM} SMOKE), {a.calls} calls per row, torch threads {a.threads}, "
        f"gap {a.gap_ms} ms; {result['machine']}"
    )
    print("| variant | wall µs (median) | CPU µs (median) | wall / bare | CPU / bare |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['variant']} | {r['wall_us']:.1f} | {r['cpu_us']:.1f} | "
            f"{r['wall_us'] / base['wall_us']:.2f} | {r['cpu_us'] / base['cpu_us']:.2f} |"
        )
    for w in worker:
        print(
            f"| worker (real verify, paper) | {w['runtime_us']:.1f} | – | {w['runtime_us'] / base['wall_us']:.2f} | – |"
            f"  eager in trusted worker {w['eager_us']:.1f} µs, passed={w['passed']}"
        )


if __name__ == "__main__":
    main()
