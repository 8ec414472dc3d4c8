"""Start-up cost of one sandboxed agent command: bubblewrap (mkbsim.sandbox) beside the earlier `unshare`
path, each running `bash -c true` to its end and reaping it.

    python benchmarks/sandbox.py                 # the table: 5 rounds of 40 commands per variant
    python benchmarks/sandbox.py --rounds 9 --commands 60 --json

Variants, interleaved round by round so that a busy machine weighs on all alike:

* ``unshare``: the agent sandbox before bubblewrap: `unshare --net` (as root, else with a user namespace),
  then a Python limiter (`RLIMIT_AS`, affinity) that becomes bash, output to a file;
* ``bwrap``: `mkbsim.sandbox.run` with an agent's policy (interpreter and site-packages read-only, the
  attempt's folder writable, 2 cores, 8 GB, 128 processes, a 4 GiB disk quota, new PID/mount/IPC/UTS/net
  namespaces): output read through a pipe, the folder's quota checked after the command;
* ``bwrap-no-limiter``: the same bubblewrap command line running bash directly (what the limiter costs);
* ``limiter``: the limiter chain alone (taskset, then bash's ulimit; without the uid drop), without bubblewrap.

Wall time per command: median and 90th percentile over all rounds, with the load average (the figures
scale with it: on a busy 2-core machine every variant waits for a core). Not CPU time: processes of a
PID namespace are reaped by bubblewrap's init, so `RUSAGE_CHILDREN` here would miss them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from mkbsim.sandbox import Policy, probe, python_paths, run
from mkbsim.sandbox._limiter import pinned

# The limiter of the pre-bubblewrap agent sandbox (mkbsim/agents/_sandbox.py before this change), verbatim.
_OLD_LIMITER = (
    "import os, resource, sys\n"
    "mem, cpus = int(sys.argv[1]), sys.argv[2]\n"
    "resource.setrlimit(resource.RLIMIT_AS, (mem, mem))\n"
    "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
    "if cpus:\n"
    "    os.sched_setaffinity(0, {int(c) for c in cpus.split(',')})\n"
    "os.execvp(sys.argv[3], sys.argv[3:])\n"
)
_COMMAND = ["bash", "-c", "true"]


def _variants(folder: Path) -> dict[str, Callable[[], None]]:
    cpus = tuple(sorted(os.sched_getaffinity(0))[:2])
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(folder), "LANG": "C.UTF-8"}
    policy = Policy(ro=python_paths(), rw=(folder,), cwd=folder, env=env, cpus=cpus)
    policy.hand_over(folder)
    out = folder.parent / "out.txt"
    unshare = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--user", "--map-root-user", "--net"]
    old = [*unshare, sys.executable, "-I", "-S", "-c", _OLD_LIMITER, str(8 << 30), ",".join(map(str, cpus)), *_COMMAND]
    bare = [str(probe().bwrap), *policy.bwrap_args(), "--", *_COMMAND]

    def popen(argv: list[str]) -> Callable[[], None]:
        def once() -> None:
            with out.open("wb") as f:
                subprocess.run(argv, cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=f, stderr=f, check=True)

        return once

    def sandboxed() -> None:
        assert run(policy, _COMMAND, timeout_s=30).exit_code == 0

    # outside a sandbox the uid drop would lock root out of its own files: the chain without it
    limiter = pinned(cpus, dataclasses.replace(policy.limits(), uid=None).argv(_COMMAND))
    return {"unshare": popen(old), "bwrap": sandboxed, "bwrap-no-limiter": popen(bare), "limiter": popen(limiter)}


def measure(rounds: int, commands: int) -> dict[str, dict[str, float]]:
    folder = Path(tempfile.mkdtemp(prefix="mkbsim-bench-")) / "attempt"
    folder.mkdir()
    try:
        variants = _variants(folder)
        walls: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(rounds):
            for name, once in variants.items():
                once()  # warm
                for _ in range(commands):
                    t0 = time.perf_counter()
                    once()
                    walls[name].append(time.perf_counter() - t0)
    finally:
        shutil.rmtree(folder.parent, ignore_errors=True)
    return {
        name: {
            "median_ms": round(1000 * statistics.median(walls[name]), 1),
            "p90_ms": round(1000 * statistics.quantiles(walls[name], n=10)[-1], 1),
        }
        for name in walls
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--commands", type=int, default=40, help="commands per variant and round")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    support = probe()
    if not support.ok:
        sys.exit(f"sandbox.py: {support.describe()}")
    results = measure(args.rounds, args.commands)
    facts = {"bwrap": support.describe(), "machine": platform.platform(), "cores": os.cpu_count(),
             "load": os.getloadavg()[0], "results": results}  # fmt: skip
    if args.json:
        print(json.dumps(facts, indent=2))
        return
    print(f"{support.describe()}; {platform.platform()}; load {os.getloadavg()[0]:.1f}")
    print(f"{'variant':18} {'median ms':>10} {'p90 ms':>8}")
    for name, r in results.items():
        print(f"{name:18} {r['median_ms']:>10} {r['p90_ms']:>8}")


if __name__ == "__main__":
    main()
