"""Timing verdicts under a controlled load (DESIGN §5, "time the submission cannot touch"): false positives on
honest submissions and false negatives on the timing cheats, with k busy processes beside the verifier, before
(the first timing round's verdict, as when a timing rule fired once) and after (confirmed by a second round).

    .venv/bin/python benchmarks/timing_rules_under_load.py --loads 0 1 2 4 --repeat 3 [--honest FILE:PROBLEM ...]

Honest cases: the cpu examples and ``tests/verifier/honest``, or those given with ``--honest`` (e.g. some of these
and a red team's honest folder). Cheats, each expected to fail with its code: an audit-aware kernel idle when not
audited (``decorative_dsl``: DSL time), one that knows the evidence calls' places (the plan's order fixed, as its
test does: ``decorative_dsl``: scored time), a worker reporting a twentieth of a 2 ms call (``timing_tamper``: the
trusted clock), and a kernel on a device profile so slow that its time beats the speed of light
(``timing_tamper``: SOL). One line per verification on stderr; the table of rates on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "submissions"
TESTS = ROOT / "tests" / "verifier"
HONEST = [
    (EXAMPLES / "p36_rmsnorm_tirx.py", "p36"),
    (EXAMPLES / "p28_fused_add_rmsnorm_tirx.py", "p28"),
    (EXAMPLES / "p25_kv_block_copy_tirx.py", "p25"),
    *((p, "p36") for p in sorted((TESTS / "honest").glob("*.py"))),
]


@dataclass
class Cheat:
    name: str
    path: Path
    problem: str
    expected: str
    setup: Callable[[Any], contextlib.AbstractContextManager[None]]


@contextlib.contextmanager
def _nothing(session: Any) -> Iterator[None]:
    yield


@contextlib.contextmanager
def _known_plan(session: Any) -> Iterator[None]:
    """The timing phase's order fixed (warmups, scored, evidence, null calls), as the case's test does."""
    from mkbsim.verifier import _phases

    keys = itertools.count()
    saved = _phases.rng.random
    _phases.rng.random = lambda: next(keys) / 10**6  # type: ignore[method-assign]
    try:
        yield
    finally:
        _phases.rng.random = saved  # type: ignore[method-assign]


@contextlib.contextmanager
def _twentieth(session: Any) -> Iterator[None]:
    """What native code writing the control page could do: report a twentieth of every call."""
    from mkbsim.verifier._control import ControlPage

    honest = ControlPage.report

    def forged(page: ControlPage, samples: Any = ()) -> dict[str, Any]:
        report = honest(page, samples)
        report["ms"], report["host_ms"] = report["ms"] / 20, report["host_ms"] / 20
        return report

    ControlPage.report = forged  # type: ignore[method-assign]
    try:
        yield
    finally:
        ControlPage.report = honest  # type: ignore[method-assign]


@contextlib.contextmanager
def _slow_device(session: Any) -> Iterator[None]:
    saved = session._profile
    slow = {"bandwidth_bytes_per_s": 1.0, "peak_flops_per_s": {k: 1.0 for k in ("fp32", "bf16", "fp8", "fp4", "int")}}
    session._profile = ("a slow device", slow)
    try:
        yield
    finally:
        session._profile = saved


def _spinning_kernel(folder: Path) -> Path:
    """The p36 example taking 2 ms of CPU more per call (far above the clock's noise)."""
    path = folder / "spinning_p36.py"
    spin = "\n\nimport time\n_kernel_run = run\n\n\ndef run(*inputs):\n    t = time.thread_time()\n"
    spin += "    while time.thread_time() - t < 0.002:\n        pass\n    return _kernel_run(*inputs)\n"
    path.write_text((EXAMPLES / "p36_rmsnorm_tirx.py").read_text() + spin)
    return path


def cheats(folder: Path) -> list[Cheat]:
    return [
        Cheat("idle_kernel", TESTS / "adversarial" / "audit_aware_idle_kernel.py", "p36", "decorative_dsl", _nothing),
        Cheat("known_plan", TESTS / "evidence" / "known_plan_idle_kernel.py", "p36", "decorative_dsl", _known_plan),
        Cheat("twentieth_reported", _spinning_kernel(folder), "p36", "timing_tamper", _twentieth),
        Cheat("below_sol", EXAMPLES / "p36_rmsnorm_tirx.py", "p36", "timing_tamper", _slow_device),
    ]


@contextlib.contextmanager
def busy(k: int) -> Iterator[None]:
    """``k`` processes spinning on the CPU for as long as the block runs."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(k)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _ratio(summary: dict[str, Any]) -> str:
    """The scored calls' median CPU cost over the evidence calls' (``_judge.scored_time`` on cpu)."""
    scored, watched = summary.get("cpu_median_ms"), summary.get("evidence_cpu_median_ms")
    if not scored or not watched:
        return "-"
    harness = summary.get("null_cpu_over_ms") or 0.0  # net: the harness's own CPU around a call taken off
    return f"{scored / watched:.3f} (net {(scored - harness) / max(watched - harness, 1e-9):.3f})"


def _line(kind: str, name: str, k: int, report: Any) -> dict[str, Any]:
    rounds = report.details.get("timing_rounds") or [{}]
    first = rounds[0].get("failure")
    row = {"kind": kind, "name": name, "k": k, "first": first, "final": report.failure, "rounds": len(rounds)}
    print(
        f"k={k} load={os.getloadavg()[0]:.1f} {kind} {name}: round one {first}, verdict {report.failure} "
        f"({len(rounds)} rounds) scored/watched cpu {' '.join(_ratio(r) for r in rounds)}; "
        + "; ".join(f"{(r.get('feedback') or 'pass')[:140]}" for r in rounds),
        file=sys.stderr,
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, nargs="+", default=[0, 1, 2, 4])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--honest", nargs="*", default=[], help="the honest cases, FILE:PROBLEM (default: HONEST)")
    args = parser.parse_args()
    honest = [] if args.honest else list(HONEST)
    for case in args.honest:
        path, _, problem = case.rpartition(":")
        if not path or not Path(path).is_file():
            parser.error(f"{case}: expected FILE:PROBLEM with an existing file")
        honest.append((Path(path), problem))

    import torch

    from mkbsim.verifier import VerifierSession

    torch.set_num_threads(1)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, VerifierSession("cpu") as session:
        bad = cheats(Path(tmp))
        for path, problem in honest[:1]:  # warm: the zygote, the eager baselines of the first problem
            session.verify(path, problem, "tirx")
        for _ in range(args.repeat):  # every load once a repeat: a run cut short still covers them all
            for k in args.loads:
                with busy(k):
                    for path, problem in honest:
                        rows.append(_line("honest", f"{path.name}:{problem}", k, session.verify(path, problem, "tirx")))
                    for cheat in bad:
                        with cheat.setup(session):
                            report = session.verify(cheat.path, cheat.problem, "tirx")
                        row = _line("cheat", cheat.name, k, report)
                        row["expected"] = cheat.expected
                        rows.append(row)
    _table(rows, args.loads)


def _table(rows: list[dict[str, Any]], loads: list[int]) -> None:
    print("| k busy | honest runs | FP one round | FP confirmed | cheat runs | FN one round | FN confirmed | "
          "cheats failing their own code (confirmed) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for k in loads:
        honest = [r for r in rows if r["k"] == k and r["kind"] == "honest"]
        bad = [r for r in rows if r["k"] == k and r["kind"] == "cheat"]
        print(
            f"| {k} | {len(honest)} | {sum(r['first'] is not None for r in honest)} "
            f"| {sum(r['final'] is not None for r in honest)} | {len(bad)} | {sum(r['first'] is None for r in bad)} "
            f"| {sum(r['final'] is None for r in bad)} | {sum(r['final'] == r['expected'] for r in bad)} |"
        )
    for r in rows:
        if (r["kind"] == "honest" and r["final"]) or (r["kind"] == "cheat" and r["final"] != r["expected"]):
            print(f"k={r['k']} {r['kind']} {r['name']}: round one {r['first']}, verdict {r['final']}")


if __name__ == "__main__":
    main()
