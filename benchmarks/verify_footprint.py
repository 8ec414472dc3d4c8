"""What one ``mkbsim verify`` costs: its wall time, the CPU time of it and its processes, and the peak resident memory
(``VmHWM``) of each process it starts (the zygote's workers among them), read from ``/proc`` every 0.1 s while it runs.
A checkout given with ``--tree`` is imported instead of this one (an older commit, unpacked with ``git archive``), so
two verifiers are measured side by side in one run, interleaved.

    python benchmarks/verify_footprint.py FILE --problem p36 --dsl tirx [--tree DIR ...] [--rounds 2] \\
        [-- --workload production]

Prints one JSON line per verification: the tree, the round, wall and CPU seconds, the verdict, the verifier's phase
times, and the processes' peak memory (MiB), largest first (the candidate's worker is the zygote's child whose peak is
largest: it holds the call's inputs, the provenance vault's copies and the launches' snapshots).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _children() -> dict[int, list[int]]:
    """Every process's children, by parent id (from /proc, once)."""
    found: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        found.setdefault(parent, []).append(int(entry))
    return found


def _descendants(pid: int) -> list[int]:
    children, found, todo = _children(), [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _peak_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _verify(tree: Path, argv: list[str]) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(tree), LITELLM_LOCAL_MODEL_COST_MAP="True")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mkbsim", "verify", *argv, "--json"], cwd=tree, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    peaks: dict[int, int] = {}
    while proc.poll() is None:
        for pid in [proc.pid, *_descendants(proc.pid)]:
            kib = _peak_kib(pid)
            if kib is not None:
                peaks[pid] = max(peaks.get(pid, 0), kib)
        time.sleep(0.1)
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        report = json.loads(out)
    except json.JSONDecodeError:
        report = {"error": (err or out)[-400:]}
    details = report.get("details") or {}
    return {
        "wall_s": round(wall, 1),
        "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
        "passed": report.get("passed"), "failure": report.get("failure"), "error": report.get("error"),
        "phases": {k: round(v, 2) for k, v in (details.get("overhead") or {}).items() if isinstance(v, float)},
        "peak_mib": sorted((round(kib / 1024) for kib in peaks.values()), reverse=True)[:4],
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--problem", required=True)
    parser.add_argument("--dsl", required=True)
    parser.add_argument("--tree", action="append", type=Path, help="a checkout to import instead (repeatable)")
    parser.add_argument("--rounds", type=int, default=1)
    args, rest = parser.parse_known_args()  # the others go to `mkbsim verify` (after --)
    trees = args.tree or [ROOT]
    more = [a for a in rest if a != "--"]
    argv = [str(Path(args.file).resolve()), "--problem", args.problem, "--dsl", args.dsl, *more]
    for r in range(args.rounds):
        for tree in trees:
            print(json.dumps({"tree": str(tree), "round": r, **_verify(tree.resolve(), argv)}), flush=True)


if __name__ == "__main__":
    main()
